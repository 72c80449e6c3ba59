// A Gemma-4 text model (dense, E2B / E4B with per-layer embeddings and
// KV-shared layers, 26B-A4B with experts) in a GGUF file as llama.cpp's
// converter (conversion/gemma.py, class Gemma4Model) writes it and its
// loader (src/models/gemma4.cpp) reads it: the `gemma4.*` metadata as the
// Hugging Face gemma4_text config it came from. What the converter spreads
// over keys and tensors is gathered back: per-layer key/value head counts
// and MLP widths (num_global_key_value_heads, use_double_wide_mlp), the
// sliding and full head sizes, attention_k_eq_v from the full layers' missing
// attn_v, and proportional RoPE from the rope_freqs tensor (1 for rotated
// pairs, 1e30 for the others). Norms are stored as w (Gemma-4's RMSNorm
// scales by w), so nothing is undone there. Tensor names: gguf_model.h.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace splitdec {

class GgufFile;
struct ModelConfig;

// The Hugging Face config.json (model_type gemma4_text) that the file's
// metadata stands for. ConfigError naming the key (or FormatError naming
// the tensor) for a value that is missing, out of range, or one that the
// Hugging Face model cannot express.
nlohmann::json gemma4_config_from_gguf(const GgufFile& file);
// The decoder's config: the above, parsed, with the GGUF conventions set.
ModelConfig gemma4_model_config_from_gguf(const GgufFile& file);

// Where llama.cpp's KV sharing differs from Hugging Face's for these layer
// types (true: sliding) and the last `shared` layers sharing: "" when they
// agree, else why. Hugging Face hands a shared layer the last earlier layer
// of its type that owns K/V; llama.cpp the last owner for full layers and
// the one before it for sliding ones (llama-model.cpp), so they agree when
// the owners end on a sliding layer then a full one, as every checkpoint's do.
std::string gemma4_kv_sharing_mismatch(const std::vector<bool>& sliding, int64_t shared);

}  // namespace splitdec
