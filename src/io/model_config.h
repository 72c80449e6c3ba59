// The decoder's configuration, read from a Hugging Face config.json.
//
// Every field that the model math uses is resolved here, once, into plain
// numbers and one LayerSpec per layer, so that the model file and the
// kernels never look at the family or at JSON. Each family's parser is its
// own file in io/families/, picked by model_type. Absent fields take the
// Hugging Face class defaults; unsupported values are ConfigErrors that name
// the field and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "mask/mask_contract.h"

namespace splitdec {

// Which family parsed the config (io/families/); the math reads the data below, not this.
enum class Family { Gemma3, Gemma4 };

struct LayerSpec {
  LayerType type = LayerType::Full;
  int head_dim = 0;
  int num_kv_heads = 0;
  int intermediate_size = 0;
  int window = 0;  // sliding layers: keys visible including the query; 0 on full layers
  // RoPE inverse frequencies, head_dim/2 of them (rotate_half pairs i and
  // i + head_dim/2). Non-rotated pairs hold 0; linear scaling is folded in.
  std::vector<float> inv_freq;
  bool k_eq_v = false;  // no v_proj: V is the raw k_proj output through v_norm
  int kv_source = 0;    // the layer whose K/V this layer reads (itself unless shared)
  bool v_norm = false;  // V goes through an RMS norm without weight (Gemma-4)
  // A learned scalar (checkpoint tensor layer_scalar, default 1) multiplies
  // the layer output after both residual adds (Gemma-4).
  bool layer_scalar = false;
  // A mixture of experts beside the dense MLP (Gemma-4 26B-A4B; 0: none):
  // a router picks top_k of num_experts per token (model/mixture_of_experts.h).
  int num_experts = 0;
  int top_k_experts = 0;
  int expert_intermediate_size = 0;
};

struct ModelConfig {
  std::string model_type;  // as written in config.json
  Family family = Family::Gemma3;
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  float rms_norm_eps = 1e-6f;
  float attn_scale = 1.f;  // multiplies q.k
  // RMSNorm flavour: Gemma-3 multiplies by (1 + w), Gemma-4 by w.
  bool norm_adds_one = true;
  // The embedding scale sqrt(hidden_size): rounded to the checkpoint's float
  // type as Hugging Face does, or kept in f32 as llama.cpp does (GGUF files).
  bool embed_scale_rounded = true;
  // Applied to the logits when set (see docs/semantics.md for which classes).
  std::optional<float> final_logit_softcap;
  bool tie_word_embeddings = true;
  int bos_token_id = 2;
  std::vector<int> eos_token_ids{1};
  int pad_token_id = 0;
  // Multimodal special tokens (-1 where the family has none).
  int boi_token_id = -1, eoi_token_id = -1, image_token_id = -1, video_token_id = -1;
  int boa_token_id = -1, eoa_token_id = -1, audio_token_id = -1;
  int mm_tokens_per_image = 256;
  MaskPolicy default_policy = MaskPolicy::Causal;
  // Per-layer embeddings (Gemma-4 E2B/E4B; 0: none): each layer also reads a
  // per_layer_dim-wide input per token, from a packed table of
  // per_layer_vocab rows and a projection of the input embedding
  // (model/per_layer_embeddings.h).
  int per_layer_dim = 0;
  int per_layer_vocab = 0;
  std::vector<LayerSpec> layers;

  bool is_kv_shared(int layer) const { return layers[size_t(layer)].kv_source != layer; }
};

// `source` names the file in error messages.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);
// A model folder's config.json, or a GGUF file's metadata (io/families/gguf_model.h).
// With `mmproj` (an mmproj GGUF, llama.cpp's --mmproj), the model is a GGUF
// and the pair is one multimodal model (io/families/gemma3_mmproj.h).
ModelConfig load_model_config(const std::string& model_dir, const std::string& mmproj = "");
// ConfigError unless `model_dir` is a GGUF and `mmproj` a file: what
// --mmproj pairs with (a folder brings its own vision tower).
void check_mmproj_pairing(const std::string& model_dir, const std::string& mmproj);

}  // namespace splitdec
