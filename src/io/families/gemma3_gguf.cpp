#include "io/families/gemma3_gguf.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

namespace {

// llama.cpp's names of a layer's tensors beside the checkpoint's
// (gguf-py/gguf/constants.py and tensor_mapping.py, arch GEMMA3).
const std::vector<std::pair<const char*, const char*>>& layer_names() {
  static const std::vector<std::pair<const char*, const char*>> names = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_norm", "pre_feedforward_layernorm"},
      {"post_ffw_norm", "post_feedforward_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  return names;
}

// The checkpoint name of a GGUF tensor name, "" when it has none.
std::string checkpoint_name(const std::string& gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  static const std::regex layer(R"(blk\.(\d{1,4})\.([a-z_]+)\.weight)");
  std::smatch m;
  if (!std::regex_match(gguf, m, layer)) return "";
  for (const auto& [ours, theirs] : layer_names())
    if (m[2] == ours) return "model.layers." + m[1].str() + "." + theirs + ".weight";
  return "";
}

}  // namespace

std::string gguf_tensor_name(const std::string& name) {
  if (name == "embed_tokens.weight") return "token_embd.weight";
  if (name == "norm.weight") return "output_norm.weight";
  if (name == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(layers\.(\d+)\.(.+)\.weight)");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return "";
  for (const auto& [ours, theirs] : layer_names())
    if (m[2] == theirs) return "blk." + m[1].str() + "." + ours + ".weight";
  return "";
}

json gemma3_config_from_gguf(const GgufFile& f) {
  auto fail = [&](const std::string& key, const std::string& what) { throw ConfigError(f.name() + ": metadata '" + key + "' " + what); };
  const std::optional<std::string> arch = f.string("general.architecture");
  if (!arch) fail("general.architecture", "is missing");
  if (*arch != "gemma3")
    fail("general.architecture",
         "is '" + *arch + "'; splitdec reads gemma3 GGUFs (text model); " +
             (*arch == "clip" ? "an mmproj file holds a vision tower: give it as --mmproj beside the text model's GGUF"
                              : "other architectures are not read yet"));
  const std::string a = "gemma3.";
  // A count read from the file, range-checked under its own key.
  auto count = [&](const std::string& key, std::optional<int64_t> fallback, int64_t limit) -> int64_t {
    const std::optional<int64_t> v = f.integer(key);
    if (!v && !fallback) fail(key, "is missing");
    const int64_t x = v ? *v : *fallback;
    if (x < 1 || x > limit) fail(key, "value " + std::to_string(x) + " is outside [1, " + std::to_string(limit) + "]");
    return x;
  };
  auto positive = [&](const std::string& key, double fallback) {
    const double x = f.number(key).value_or(fallback);
    if (!(x > 0) || !std::isfinite(x)) fail(key, "must be a positive finite number, got " + std::to_string(x));
    return x;
  };
  json c;
  c["model_type"] = "gemma3_text";
  c["architectures"] = {"Gemma3ForCausalLM"};
  const int64_t hidden = count(a + "embedding_length", std::nullopt, 1 << 17);
  const int64_t layers = count(a + "block_count", std::nullopt, 1024);
  const int64_t heads = count(a + "attention.head_count", std::nullopt, 1024);
  c["hidden_size"] = hidden;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;
  c["intermediate_size"] = count(a + "feed_forward_length", std::nullopt, 1 << 20);
  c["num_key_value_heads"] = count(a + "attention.head_count_kv", heads, 1024);
  const int64_t head_dim = count(a + "attention.key_length", hidden / heads, 1 << 14);
  if (count(a + "attention.value_length", head_dim, 1 << 14) != head_dim)
    fail(a + "attention.value_length", "differs from attention.key_length (" + std::to_string(head_dim) + "); Gemma-3 has one head size");
  c["head_dim"] = head_dim;
  // llama.cpp scales queries by 1/sqrt(key_length), except on the 62-layer
  // (27B) model: 1/sqrt(embedding_length / head_count) (llama-model.cpp),
  // as the checkpoints' query_pre_attn_scalar says.
  c["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : head_dim;
  c["max_position_embeddings"] = count(a + "context_length", 131072, int64_t(1) << 40);
  c["rms_norm_eps"] = positive(a + "attention.layer_norm_rms_epsilon", 1e-6);
  c["rope_theta"] = positive(a + "rope.freq_base", 10000.0);
  // llama.cpp's Gemma-3 sliding layers use base 10000 and no scaling.
  c["rope_local_base_freq"] = positive(a + "rope.freq_base_swa", 10000.0);
  const std::string scaling = f.string(a + "rope.scaling.type").value_or("none");
  std::optional<double> factor = f.number(a + "rope.scaling.factor");
  if (!factor && f.find(a + "rope.scale_linear")) factor = f.number(a + "rope.scale_linear");  // older files
  if (scaling == "linear" || (scaling == "none" && factor && *factor != 1.0)) {
    if (!factor || !(*factor > 0) || !std::isfinite(*factor)) fail(a + "rope.scaling.factor", "must be a positive number for linear scaling");
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", *factor}};
  } else if (scaling != "none") {
    fail(a + "rope.scaling.type", "value '" + scaling + "' is not supported (none and linear are)");
  }
  if (const std::optional<double> cap = f.number(a + "final_logit_softcapping")) c["final_logit_softcapping"] = *cap;

  // Layer types: llama.cpp's Gemma-3 has every 6th layer full, the rest
  // sliding (set_swa_pattern(6)); a file may say otherwise with
  // attention.sliding_window_pattern, a period or one bool per layer (true: sliding).
  const int64_t window = f.integer(a + "attention.sliding_window").value_or(0);
  if (window < 0 || window > (int64_t(1) << 30)) fail(a + "attention.sliding_window", "value " + std::to_string(window) + " is out of range");
  std::vector<bool> sliding(static_cast<size_t>(layers), false);
  const std::string pattern_key = a + "attention.sliding_window_pattern";
  const GgufValue* pattern = f.find(pattern_key);
  if (pattern && pattern->type == GgufType::Array) {
    const std::vector<bool> p = f.booleans(pattern_key);
    if (int64_t(p.size()) != layers) fail(pattern_key, "has " + std::to_string(p.size()) + " entries for " + std::to_string(layers) + " layers");
    sliding = p;
  } else {
    const int64_t period = pattern ? count(pattern_key, 6, 1024) : 6;
    for (int64_t i = 0; i < layers; ++i) sliding[size_t(i)] = (i + 1) % period != 0;
  }
  json types = json::array();
  for (int64_t i = 0; i < layers; ++i) types.push_back(window > 0 && sliding[size_t(i)] ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  if (window > 0) c["sliding_window"] = window;

  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw FormatError(f.name() + ": tensor 'token_embd.weight' is missing");
  if (embd->ne.size() != 2) throw FormatError(f.name() + ": tensor 'token_embd.weight' is not 2-D");
  if (embd->ne[1] < 1 || embd->ne[1] > (1u << 24))
    throw FormatError(f.name() + ": tensor 'token_embd.weight' has " + std::to_string(embd->ne[1]) + " rows, outside [1, 16777216]");
  const int64_t vocab = int64_t(embd->ne[1]);
  c["vocab_size"] = vocab;
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;

  auto token_id = [&](const std::string& key, int64_t fallback) {
    const int64_t id = f.integer(key).value_or(fallback);
    if (id < 0 || id >= vocab) fail(key, "value " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    return id;
  };
  c["bos_token_id"] = token_id("tokenizer.ggml.bos_token_id", 2);
  c["pad_token_id"] = token_id("tokenizer.ggml.padding_token_id", 0);
  // Generation ends at <eos>, at the end-of-turn token when the file names
  // one, and at <end_of_turn> (llama.cpp stops on it by its text).
  json eos = json::array({token_id("tokenizer.ggml.eos_token_id", 1)});
  auto add_eos = [&](int64_t id) {
    if (std::find(eos.begin(), eos.end(), json(id)) == eos.end()) eos.push_back(id);
  };
  if (f.find("tokenizer.ggml.eot_token_id")) add_eos(token_id("tokenizer.ggml.eot_token_id", 1));
  const std::vector<std::string_view> tokens = f.strings("tokenizer.ggml.tokens");
  for (size_t id = 0; id < tokens.size() && int64_t(id) < vocab; ++id)
    if (tokens[id] == "<end_of_turn>") add_eos(int64_t(id));
  c["eos_token_id"] = eos;
  return c;
}

ModelConfig gemma3_model_config_from_gguf(const GgufFile& f) {
  ModelConfig c = parse_model_config(gemma3_config_from_gguf(f), f.name());
  c.norm_adds_one = false;          // the converter stored 1 + w
  c.embed_scale_rounded = false;    // llama.cpp scales by sqrtf(n_embd) in f32
  return c;
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
  if (v.blocks != BlockType::None && v.shape.size() != 2)
    throw FormatError(f.name() + ": tensor '" + t.name + "' is " + ggml_type_name(t.type) + " but not 2-D");
  return v;
}

std::map<std::string, TensorView> gemma3_tensors_from_gguf(const GgufFile& f) {
  std::map<std::string, TensorView> out;
  for (const GgufTensor& t : f.tensors()) {
    const std::string name = checkpoint_name(t.name);
    if (name.empty())
      throw FormatError(f.name() + ": tensor '" + t.name + "' is not part of a Gemma-3 text model" +
                        (t.name.starts_with("v.") || t.name.starts_with("mm.") ? " (a vision tower's: give the mmproj file as --mmproj)" : ""));
    if (!out.emplace(name, gguf_tensor_view(f, t)).second)
      throw FormatError(f.name() + ": tensors '" + out.at(name).name + "' and '" + t.name + "' are the same tensor of the model");
  }
  return out;
}

}  // namespace splitdec
