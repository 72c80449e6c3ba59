// A chat message as the server parsed it: its role and its parts in order,
// text or media rows (post-projector embeddings, one row per soft token).
#pragma once

#include <string>
#include <vector>

#include "io/media_embeddings.h"
#include "splitdec/modality.h"

namespace splitdec::serve {

struct MessagePart {
  Modality kind = Modality::Text;  // Text, Image or Audio
  std::string text;                // when kind is Text
  MediaEmbeddings media;           // otherwise
};

struct ChatMessage {
  std::string role;  // system, user or assistant (checked by chat_prompt)
  std::vector<MessagePart> parts;
};

}  // namespace splitdec::serve
