// A chat message as the server parsed it: its role and its parts in order,
// text or media rows (post-projector embeddings, one row per soft token).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/media_embeddings.h"
#include "splitdec/modality.h"

namespace splitdec::serve {

struct MessagePart {
  Modality kind = Modality::Text;  // Text, Image or Audio
  std::string text;                // when kind is Text
  MediaEmbeddings media;           // otherwise
};

struct ChatMessage {
  std::string role;  // system, user, assistant or tool (checked by chat_prompt)
  std::vector<MessagePart> parts;
  // assistant: OpenAI's tool_calls [{id, type, function: {name, arguments}}] (null: none)
  nlohmann::json tool_calls = nullptr;
  std::string tool_call_id = {};  // tool: the call it answers
};

// A request's tools (OpenAI's list of {"type": "function", "function":
// {...}}) and what it asks of them.
struct ToolUse {
  nlohmann::json tools;       // null: no tools
  std::string choice = "auto";  // auto | none | required | function (one by name)
  std::string function;       // choice "function": its name
};

}  // namespace splitdec::serve
