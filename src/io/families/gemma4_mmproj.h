// Gemma-4's vision encoder (projector gemma4v) and conformer audio encoder
// (gemma4a) in an mmproj GGUF, as llama.cpp's converter writes them
// (conversion/gemma.py, class Gemma4VisionAudioModel) and its multimodal
// library reads them (tools/mtmd/clip.cpp, models/gemma4v.cpp, gemma4a.cpp);
// docs/gemma4-mmproj-facts.md has the keys, tensors and line references.
// A text GGUF (gemma4) and its mmproj together are one Gemma-4 (model_type
// gemma4) model, read as the Hugging Face folder it came from:
//  - vision_config from the clip.vision.* keys; head_dim, kv heads and the
//    pooling kernel take clip.cpp's defaults when absent (E / H, H, 3); the
//    position table size, standardize (v.std_bias) and clipped linears
//    (*.input_min) from the tensors;
//  - audio_config from the clip.audio.* keys; the subsampling channels, the
//    depthwise kernel and output_proj_dims from the tensors' shapes; norm eps
//    1e-6, as clip.cpp forces (earlier conversions wrote a wrong value);
//  - the image and audio token ids by their pieces in the text vocabulary;
//  - image tokens attend bidirectionally unless the text model has per-layer
//    inputs (E2B / E4B, which are causal: llama.cpp tells them by their
//    widths 1536 / 2560, the same two models).
// What the converter changed and the reader undoes: the patch embedding was
// permuted to a conv's [E, 3, P, P] (HF's rows are P x P x 3 pixels), and the
// audio per_dim_scale was stored after its softplus (HF applies softplus in
// the forward pass). Every other tensor is HF's bytes under llama.cpp's name.
// The FFN activation is HF's gelu_pytorch_tanh (clip.cpp runs gelu_quick for
// these files, which carry no clip.use_gelu: a known llama.cpp deviation).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "io/families/mmproj.h"

namespace splitdec {

class GgufFile;
struct ModelConfig;

// The config.json (model_type gemma4) the pair stands for. ConfigError
// naming the file and the key for anything the pair cannot be.
nlohmann::json gemma4_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);
ModelConfig gemma4_model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj);

// The mmproj's tensors under checkpoint names (model.vision_tower.*,
// model.embed_vision.*, model.audio_tower.*, model.embed_audio.*): in place,
// but for the two the converter changed, rewritten back. FormatError naming
// the tensor for one that is not part of Gemma-4's towers.
MmprojTensors gemma4_tensors_from_mmproj(const GgufFile& file);

// llama.cpp's mmproj name for a checkpoint tensor name of the towers; "" when
// it has none.
std::string gemma4_mmproj_tensor_name(const std::string& checkpoint_name);

// What the converter does to a tensor's values on the way into the file
// (and the reader undoes): the patch embedding's permutation, softplus.
enum class Gemma4MmprojChange { None, PatchToConv, Softplus };
Gemma4MmprojChange gemma4_mmproj_change(const std::string& checkpoint_name);
// That change applied to a checkpoint tensor's values as the converter
// applies it, and undone on a file's values (`patch`: the patch size the
// permutation is over; `where` names the tensor in a FormatError for values
// no softplus gives).
std::vector<float> gemma4_mmproj_to_file(Gemma4MmprojChange change, std::vector<float> values, int64_t patch);
std::vector<float> gemma4_mmproj_from_file(Gemma4MmprojChange change, std::vector<float> values, int64_t patch,
                                           const std::string& where);

}  // namespace splitdec
