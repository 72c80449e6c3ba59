#include "io/families/mmproj.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/families/gemma3_mmproj.h"
#include "io/families/gemma4_mmproj.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

namespace {

// The family whose towers the mmproj holds: "gemma3" (projector gemma3) or
// "gemma4" (gemma4v / gemma4a); "" for any other.
std::string tower_family(const GgufFile& mmproj) {
  for (const char* key : {"clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type"}) {
    const std::string type = mmproj.string(key).value_or("");
    if (type == "gemma3") return "gemma3";
    if (type == "gemma4v" || type == "gemma4a") return "gemma4";
  }
  return "";
}

std::string text_family(const GgufFile& text) {
  const std::string arch = text.string("general.architecture").value_or("");
  if (arch != "gemma3" && arch != "gemma4")
    throw ConfigError(text.name() + ": metadata 'general.architecture' is '" + arch +
                      "'; an mmproj pairs with a gemma3 or gemma4 text GGUF");
  return arch;
}

// A Gemma-3 text model with a Gemma-4 tower (or the reverse) is refused by
// name before either reader reports a key it does not know.
void check_same_family(const GgufFile& text, const GgufFile& mmproj) {
  const std::string want = text_family(text), have = tower_family(mmproj);
  if (!have.empty() && have != want)
    throw ConfigError(mmproj.name() + ": holds " + (have == "gemma3" ? "Gemma-3's" : "Gemma-4's") + " towers, but " +
                      text.name() + " is a " + want + " text model: the mmproj belongs to another model");
}

}  // namespace

nlohmann::json config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  check_same_family(text, mmproj);
  return text_family(text) == "gemma3" ? gemma3_config_from_gguf_pair(text, mmproj) : gemma4_config_from_gguf_pair(text, mmproj);
}

ModelConfig model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  check_same_family(text, mmproj);
  return text_family(text) == "gemma3" ? gemma3_model_config_from_gguf_pair(text, mmproj)
                                       : gemma4_model_config_from_gguf_pair(text, mmproj);
}

MmprojTensors tensors_from_mmproj(const GgufFile& mmproj) {
  if (tower_family(mmproj) == "gemma4") return gemma4_tensors_from_mmproj(mmproj);
  MmprojTensors out;
  out.views = gemma3_tensors_from_mmproj(mmproj);
  return out;
}

std::string mmproj_name_in(const GgufFile& mmproj, const std::string& checkpoint_name) {
  return tower_family(mmproj) == "gemma4" ? gemma4_mmproj_tensor_name(checkpoint_name) : mmproj_tensor_name(checkpoint_name);
}

}  // namespace splitdec
