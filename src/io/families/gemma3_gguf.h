// A Gemma-3 text model in a GGUF file as llama.cpp's converter
// (convert_hf_to_gguf.py, class Gemma3Model) writes it and its loader reads
// it: the `gemma3.*` metadata as the Hugging Face config it came from, and
// llama.cpp's tensor names as the checkpoint names the loader knows. What
// the converter changes is undone here or in the config: norms are stored
// as 1 + w (ModelConfig::norm_adds_one is false for them, so they are used
// as stored), and the embedding scale stays f32 as llama.cpp computes it.
// The keys and tensors read are listed in docs/gguf.md.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace splitdec {

class GgufFile;
struct GgufTensor;
struct ModelConfig;

// The Hugging Face config.json (model_type gemma3_text) that the file's
// metadata stands for. ConfigError naming the key for a missing, mistyped or
// out-of-range value, or an architecture other than gemma3.
nlohmann::json gemma3_config_from_gguf(const GgufFile& file);
// The decoder's config: the above, parsed, with the GGUF conventions set.
ModelConfig gemma3_model_config_from_gguf(const GgufFile& file);

// Every tensor of the file under its checkpoint name
// (model.layers.N.self_attn.q_proj.weight ...), in place. F32, F16 and BF16
// tensors are float views; Q8_0 and Q4_0 ones are block views
// (TensorView::blocks). FormatError naming the tensor for any other type or
// for a name that is not part of a Gemma-3 text model.
std::map<std::string, TensorView> gemma3_tensors_from_gguf(const GgufFile& file);

// One GGUF tensor as a view of its bytes (shape in row-major order, the
// reverse of ggml's ne): float types as float views, the block types splitdec
// runs as block views. FormatError naming the tensor and its type otherwise.
TensorView gguf_tensor_view(const GgufFile& file, const GgufTensor& tensor);

// llama.cpp's name for a checkpoint tensor name (without the decoder
// prefix): "layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight",
// "embed_tokens.weight" -> "token_embd.weight"; "" when it has none.
std::string gguf_tensor_name(const std::string& checkpoint_name);

}  // namespace splitdec
