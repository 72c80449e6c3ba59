// What a token position holds. Image and video positions of one run form a
// media block that attends both ways (per the model family's mask policy);
// text and audio are causal.
#pragma once

#include <cstdint>

namespace splitdec {

enum class Modality : uint8_t { Text, Image, Video, Audio };

}  // namespace splitdec
