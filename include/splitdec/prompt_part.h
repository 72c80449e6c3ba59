// One part of a plain (non-chat) prompt: text, or a media file placed there.
// A prompt given as parts reaches the engine as it is: no text is parsed
// back for placeholders, and a path may hold any character.
#pragma once

#include <string>

#include "splitdec/modality.h"

namespace splitdec {

struct PromptPart {
  Modality kind = Modality::Text;  // Text, Image or Audio
  std::string text;                // Text: the text as is; Image / Audio: the file's path
};

}  // namespace splitdec
