// A text model in a GGUF file, as llama.cpp's converter writes it: the
// family by `general.architecture` (gemma3: gemma3_gguf.h, gemma4:
// gemma4_gguf.h), and llama.cpp's tensor names beside the checkpoint names
// the loader knows, for both families. The keys and tensors read are listed
// in docs/gguf.md.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "io/safetensors.h"

namespace splitdec {

class GgufFile;
struct GgufTensor;
struct ModelConfig;

// The Hugging Face config.json (model_type gemma3_text / gemma4_text) that
// the file's metadata stands for, and the decoder's config parsed from it
// with the GGUF conventions set. ConfigError naming the key for a missing,
// mistyped or out-of-range value, or an architecture splitdec does not read.
nlohmann::json config_from_gguf(const GgufFile& file);
ModelConfig model_config_from_gguf(const GgufFile& file);

// Every tensor of the file under its checkpoint name
// (model.layers.N.self_attn.q_proj.weight ...), in place. FormatError
// naming the tensor for a type splitdec does not load or a name that is not
// part of the file's model.
std::map<std::string, TensorView> tensors_from_gguf(const GgufFile& file);

// One GGUF tensor as a view of its bytes (shape in row-major order, the
// reverse of ggml's ne): float types as float views, the block types splitdec
// runs as block views. FormatError naming the tensor and its type otherwise.
TensorView gguf_tensor_view(const GgufFile& file, const GgufTensor& tensor);

// llama.cpp's name for a checkpoint tensor name (without the decoder
// prefix): "layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight",
// "embed_tokens.weight" -> "token_embd.weight"; "" when it has none.
std::string gguf_tensor_name(const std::string& checkpoint_name);

}  // namespace splitdec
