// An mmproj GGUF (llama.cpp's media towers, a file beside the text model's
// GGUF) read as the checkpoint a Hugging Face folder would hold: which
// family's reader applies (the text GGUF's architecture: gemma3 -> the
// SigLIP tower, gemma3_mmproj.h; gemma4 -> gemma4v / gemma4a, gemma4_mmproj.h),
// and the tensors under checkpoint names.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace splitdec {

class GgufFile;
struct ModelConfig;

struct MmprojTensors {
  std::map<std::string, TensorView> views;  // by checkpoint name
  // Values a reader rewrote (a tensor the converter permuted or transformed):
  // the views of those point here, so these live as long as the views.
  std::vector<std::shared_ptr<const std::vector<float>>> owned;
};

// The pair's config.json and decoder config, by the text file's architecture.
nlohmann::json config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);
ModelConfig model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);

// The mmproj's tensors, by its projector type (clip.projector_type, or the
// clip.vision / clip.audio ones).
MmprojTensors tensors_from_mmproj(const GgufFile& mmproj);
// The file's name of a checkpoint tensor of its towers (for messages).
std::string mmproj_name_in(const GgufFile& mmproj, const std::string& checkpoint_name);

}  // namespace splitdec
