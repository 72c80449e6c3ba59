#include "io/families/gguf_model.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "core/error.h"
#include "io/families/gemma3_gguf.h"
#include "io/families/gemma4_gguf.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

namespace {

struct NamePair {
  const char* gguf;        // after "blk.N." (or the whole name at the top)
  const char* checkpoint;  // after "layers.N." (or after the decoder prefix)
  bool gemma4_only;
};

// llama.cpp's names of a layer's tensors beside the checkpoint's
// (gguf-py/gguf/constants.py and tensor_mapping.py, archs GEMMA3 and
// GEMMA4). Gemma-4's router scales are stored under the expert tensors'
// names with a .scale suffix, and layer_scalar gains a .weight (its
// converter's modify_tensors / filter_tensors).
const std::vector<NamePair>& layer_names() {
  static const std::vector<NamePair> names = {
      {"attn_norm.weight", "input_layernorm.weight", false},
      {"attn_q.weight", "self_attn.q_proj.weight", false},
      {"attn_k.weight", "self_attn.k_proj.weight", false},
      {"attn_v.weight", "self_attn.v_proj.weight", false},
      {"attn_output.weight", "self_attn.o_proj.weight", false},
      {"attn_q_norm.weight", "self_attn.q_norm.weight", false},
      {"attn_k_norm.weight", "self_attn.k_norm.weight", false},
      {"post_attention_norm.weight", "post_attention_layernorm.weight", false},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight", false},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", false},
      {"ffn_gate.weight", "mlp.gate_proj.weight", false},
      {"ffn_up.weight", "mlp.up_proj.weight", false},
      {"ffn_down.weight", "mlp.down_proj.weight", false},
      {"ffn_gate_inp.weight", "router.proj.weight", true},
      {"ffn_gate_inp.scale", "router.scale", true},
      {"ffn_down_exps.scale", "router.per_expert_scale", true},
      {"ffn_gate_up_exps.weight", "experts.gate_up_proj", true},
      {"ffn_down_exps.weight", "experts.down_proj", true},
      {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight", true},
      {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight", true},
      {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight", true},
      {"inp_gate.weight", "per_layer_input_gate.weight", true},
      {"proj.weight", "per_layer_projection.weight", true},
      {"post_norm.weight", "post_per_layer_input_norm.weight", true},
      {"layer_output_scale.weight", "layer_scalar", true},
  };
  return names;
}

const std::vector<NamePair>& top_names() {
  static const std::vector<NamePair> names = {
      {"token_embd.weight", "embed_tokens.weight", false},
      {"output_norm.weight", "norm.weight", false},
      {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight", true},
      {"per_layer_model_proj.weight", "per_layer_model_projection.weight", true},
      {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight", true},
  };
  return names;
}

// The checkpoint name of a GGUF tensor name, "" when it has none.
std::string checkpoint_name(const std::string& gguf, bool gemma4) {
  if (gguf == "output.weight") return "lm_head.weight";
  for (const NamePair& n : top_names())
    if (gguf == n.gguf && (gemma4 || !n.gemma4_only)) return std::string("model.") + n.checkpoint;
  static const std::regex layer(R"(blk\.(0|[1-9]\d{0,3})\.([a-z0-9_]+\.(weight|scale)))");
  std::smatch m;
  if (!std::regex_match(gguf, m, layer)) return "";
  for (const NamePair& n : layer_names())
    if (m[2] == n.gguf && (gemma4 || !n.gemma4_only)) return "model.layers." + m[1].str() + "." + n.checkpoint;
  return "";
}

std::string architecture_of(const GgufFile& f) {
  const std::optional<std::string> arch = f.string("general.architecture");
  if (!arch) throw ConfigError(f.name() + ": metadata 'general.architecture' is missing");
  if (*arch == "gemma3" || *arch == "gemma4") return *arch;
  throw ConfigError(f.name() + ": metadata 'general.architecture' is '" + *arch + "'; splitdec reads gemma3 and gemma4 GGUFs (text models); " +
                    (*arch == "clip" ? "an mmproj file holds a vision tower: give it as --mmproj beside the text model's GGUF"
                                     : "other architectures are not read"));
}

}  // namespace

json config_from_gguf(const GgufFile& f) {
  return architecture_of(f) == "gemma3" ? gemma3_config_from_gguf(f) : gemma4_config_from_gguf(f);
}

ModelConfig model_config_from_gguf(const GgufFile& f) {
  return architecture_of(f) == "gemma3" ? gemma3_model_config_from_gguf(f) : gemma4_model_config_from_gguf(f);
}

std::string gguf_tensor_name(const std::string& name) {
  for (const NamePair& n : top_names())
    if (name == n.checkpoint) return n.gguf;
  if (name == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return "";
  for (const NamePair& n : layer_names())
    if (m[2] == n.checkpoint) return "blk." + m[1].str() + "." + n.gguf;
  return "";
}

TensorView gguf_tensor_view(const GgufFile& f, const GgufTensor& t) {
  TensorView v;
  v.name = t.name;  // errors name the tensor as the file does
  v.file = f.name();
  for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) v.shape.push_back(int64_t(*it));
  v.data = t.data;
  v.nbytes = size_t(t.nbytes);
  switch (t.type) {
    case ggml_type::F32: v.dtype = DType::F32; break;
    case ggml_type::F16: v.dtype = DType::F16; break;
    case ggml_type::BF16: v.dtype = DType::BF16; break;
    case ggml_type::Q8_0: v.dtype = DType::U8, v.blocks = BlockType::Q8_0; break;
    case ggml_type::Q4_0: v.dtype = DType::U8, v.blocks = BlockType::Q4_0; break;
    case ggml_type::Q4_1: v.dtype = DType::U8, v.blocks = BlockType::Q4_1; break;
    case ggml_type::Q5_0: v.dtype = DType::U8, v.blocks = BlockType::Q5_0; break;
    case ggml_type::Q5_1: v.dtype = DType::U8, v.blocks = BlockType::Q5_1; break;
    case ggml_type::Q4_K: v.dtype = DType::U8, v.blocks = BlockType::Q4_K; break;
    case ggml_type::Q5_K: v.dtype = DType::U8, v.blocks = BlockType::Q5_K; break;
    case ggml_type::Q6_K: v.dtype = DType::U8, v.blocks = BlockType::Q6_K; break;
    default:
      throw FormatError(f.name() + ": tensor '" + t.name + "' is " + ggml_type_name(t.type) +
                        ", which splitdec does not load (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and "
                        "Q6_K are)");
  }
  // Matrices, and stacks of them (Gemma-4's experts: [experts, rows, in]).
  if (v.blocks != BlockType::None && v.shape.size() != 2 && v.shape.size() != 3)
    throw FormatError(f.name() + ": tensor '" + t.name + "' is " + ggml_type_name(t.type) + " but " +
                      std::to_string(v.shape.size()) + "-D; splitdec reads block types as matrices or stacks of them");
  return v;
}

std::map<std::string, TensorView> tensors_from_gguf(const GgufFile& f) {
  const bool gemma4 = architecture_of(f) == "gemma4";
  const char* model = gemma4 ? "Gemma-4" : "Gemma-3";
  const std::optional<int64_t> blocks = f.integer((gemma4 ? "gemma4" : "gemma3") + std::string(".block_count"));
  std::map<std::string, TensorView> out;
  for (const GgufTensor& t : f.tensors()) {
    // Gemma-4's rope_freqs (proportional RoPE's unrotated dimensions) is read
    // into the config (gemma4_gguf.cpp), not a weight.
    if (gemma4 && t.name == "rope_freqs.weight") continue;
    const std::string name = checkpoint_name(t.name, gemma4);
    if (name.empty())
      throw FormatError(f.name() + ": tensor '" + t.name + "' is not part of a " + model + " text model" +
                        (t.name.starts_with("v.") || t.name.starts_with("mm.") || t.name.starts_with("a.")
                             ? " (a media tower's: give the mmproj file as --mmproj)"
                             : ""));
    // A layer past block_count would be read by nothing: refused, as llama.cpp does.
    if (int layer = 0; blocks && std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1 && layer >= *blocks)
      throw FormatError(f.name() + ": tensor '" + t.name + "' belongs to layer " + std::to_string(layer) + ", past block_count " +
                        std::to_string(*blocks));
    if (!out.emplace(name, gguf_tensor_view(f, t)).second)
      throw FormatError(f.name() + ": tensors '" + out.at(name).name + "' and '" + t.name + "' are the same tensor of the model");
  }
  return out;
}

}  // namespace splitdec
