// Gemma-3's vision tower in an mmproj GGUF, as llama.cpp's converter writes
// it (convert_hf_to_gguf.py --mmproj, class Gemma3VisionModel) and its
// multimodal library reads it (tools/mtmd/clip.cpp, projector type gemma3):
// `general.architecture` clip, the `clip.vision.*` keys as the SigLIP
// vision_config they came from, and the `v.*` / `mm.*` tensors under the
// checkpoint names media/frontend_weights.cpp loads. A text GGUF and its
// mmproj together are one Gemma-3 (model_type gemma3) model. What the
// converter changes: `mm.soft_emb_norm` is stored as 1 + w (the tower then
// uses it as stored, SiglipWeights::soft_emb_norm_adds_one false); nothing
// else is permuted. The keys and tensors read are listed in docs/gguf.md.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "io/safetensors.h"

namespace splitdec {

class GgufFile;
struct ModelConfig;

// The config.json (model_type gemma3) that a text GGUF and its mmproj
// stand for: the text file's config as text_config, the mmproj's vision
// config, mm_tokens_per_image, and the image token ids found in the text
// file's vocabulary. ConfigError naming the file and the key for anything
// the pair cannot be (an mmproj of another projector, a projection width
// other than the text model's, image mean / std other than 0.5).
nlohmann::json gemma3_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);
// The decoder's config of the pair, with the GGUF conventions set.
ModelConfig gemma3_model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);

// The mmproj's tensors under checkpoint names
// (model.vision_tower.vision_model.*, model.multi_modal_projector.*), in
// place. FormatError naming the tensor for a name that is not part of
// Gemma-3's tower or a type splitdec does not load.
std::map<std::string, TensorView> gemma3_tensors_from_mmproj(const GgufFile& file);

// llama.cpp's mmproj name for a checkpoint tensor name of the tower
// ("model.vision_tower.vision_model.encoder.layers.3.mlp.fc1.weight" ->
// "v.blk.3.ffn_up.weight"); "" when it has none.
std::string mmproj_tensor_name(const std::string& checkpoint_name);

}  // namespace splitdec
