#include "tools/gguf_export.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/ggml_block_formats.h"
#include "io/gguf.h"
#include "io/families/gemma4_gguf.h"
#include "io/families/gguf_model.h"
#include "tokenizer/gguf_tokenizer.h"
#include "io/gguf_writer.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace splitdec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Types {
  uint32_t matrix, embedding;
  uint32_t file_type;  // general.file_type (llama.cpp's LlamaFileType)
};

Types types_named(const std::string& w) {
  using namespace ggml_type;
  if (w == "f32") return {F32, F32, 0};
  if (w == "f16") return {F16, F16, 1};
  if (w == "bf16") return {BF16, BF16, 32};
  if (w == "q8") return {Q8_0, Q8_0, 7};
  if (w == "q4") return {Q4_0, Q8_0, 2};
  // llama.cpp's K-quant mixes, simplified: every matrix in the one type,
  // the embedding in Q6_K (as its _M mixes keep it).
  if (w == "q4_k") return {Q4_K, Q6_K, 15};
  if (w == "q5_k") return {Q5_K, Q6_K, 17};
  if (w == "q6_k") return {Q6_K, Q6_K, 18};
  throw InputError("--weights " + w + " is not written to GGUF (f32, f16, bf16, q8, q4, q4_k, q5_k and q6_k are)");
}

// llama.cpp's tensor_type_fallback: rows that are not whole 256-value
// K-blocks take a 32-value type, rows not whole 32-value blocks F16.
uint32_t type_for_rows(uint32_t type, int64_t in) {
  using namespace ggml_type;
  if (in % 256 != 0) {
    if (type == Q4_K) type = Q5_0;
    else if (type == Q5_K) type = Q5_1;
    else if (type == Q6_K) type = Q8_0;
  }
  if (type != F32 && type != F16 && type != BF16 && in % 32 != 0) type = F16;
  return type;
}

WeightFormat format_of(uint32_t type) {
  switch (type) {
    case ggml_type::F32: return WeightFormat::F32;
    case ggml_type::F16: return WeightFormat::F16;
    case ggml_type::BF16: return WeightFormat::BF16;
    case ggml_type::Q8_0: return WeightFormat::Q8_0;
    default: return WeightFormat::Q4_0;
  }
}

json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw FormatError(path.string() + ": not valid JSON");
  return j;
}

// config.json with text_config's fields over the top level's, as the converter sees it.
json hparams_of(const std::string& dir) {
  json top = read_json_file(fs::path(dir) / "config.json");
  if (top.contains("text_config") && top["text_config"].is_object()) {
    json merged = top;
    merged.update(top["text_config"]);
    return merged;
  }
  return top;
}

double number_or(const json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

struct Rope {
  double theta = 1e6, local_theta = 10000;
  std::optional<double> linear_factor;
};

// Rope parameters in each config form the family parser reads.
Rope rope_of(const json& h) {
  Rope r;
  auto scaling = [&](const json& d) {
    if (!d.is_object()) return;
    const std::string type = d.value("rope_type", d.value("type", std::string("default")));
    // Gemma-4's proportional RoPE is written as rope_freqs from the layers' frequencies.
    if (type == "linear" && d.contains("factor")) r.linear_factor = d["factor"].get<double>();
    else if (type != "default" && type != "proportional")
      throw InputError("rope type '" + type + "' cannot be written to a GGUF (default, linear and Gemma-4's proportional can)");
  };
  const json rp = h.contains("rope_parameters") ? h["rope_parameters"] : json();
  if (rp.is_object() && rp.contains("full_attention")) {
    r.theta = number_or(rp["full_attention"], "rope_theta", 1e6);
    scaling(rp["full_attention"]);
    if (rp.contains("sliding_attention")) r.local_theta = number_or(rp["sliding_attention"], "rope_theta", 10000);
    return r;
  }
  r.theta = number_or(h, "rope_theta", 1e6);
  r.local_theta = number_or(h, "rope_local_base_freq", 10000);
  if (h.contains("rope_scaling")) scaling(h["rope_scaling"]);
  if (rp.is_object()) {
    r.theta = number_or(rp, "rope_theta", r.theta);
    scaling(rp);
  }
  return r;
}

// The converter marks these added tokens control whatever tokenizer_config says.
bool looks_special(const std::string& t) {
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || (t.starts_with("<|") && t.ends_with("|>")) ||
         (t.starts_with("<unused") && t.ends_with(">"));
}

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;         // SentencePiece (tokenizer.ggml.model "llama"); gemma4's are all -1000
  std::vector<std::string> merges;   // BPE (tokenizer.ggml.model "gpt2" / "gemma4")
  std::vector<int32_t> types;
};

// The converter's _create_vocab_sentencepiece: vocab_size entries, pieces
// from tokenizer.model (scores and types as SentencePiece has them), then
// the added tokens (here tokenizer.json's, which Google's folders also list
// in tokenizer_config.json) as control or user-defined with score -1000.
// A folder with only tokenizer.json is written as the converter's gpt2
// vocabulary: pieces, types and the merges. Gemma-4's converter (its
// LlamaHfVocab) writes the same pieces, user-defined ones as they are, and a
// score of -1000 for every one.
Vocabulary vocabulary_of(const std::string& dir, int vocab_size, bool gemma4) {
  using T = GgufTokenType;
  Vocabulary v;
  const size_t n = size_t(vocab_size);
  for (size_t i = 0; i < n; ++i) v.tokens.push_back("[PAD" + std::to_string(i) + "]");
  v.scores.assign(n, -10000.f);
  v.types.assign(n, int32_t(T::Unused));
  const fs::path json_path = fs::path(dir) / "tokenizer.json", model_path = fs::path(dir) / "tokenizer.model";
  if (!fs::exists(json_path)) throw InputError(dir + ": writing a GGUF needs tokenizer.json (the vocabulary it carries)");
  const json tj = read_json_file(json_path);
  if (!tj.contains("model") || !tj["model"].contains("vocab") || !tj["model"]["vocab"].is_object())
    throw FormatError(json_path.string() + ": no model.vocab");
  if (fs::exists(model_path) && !gemma4) {  // Gemma4Model reads tokenizer.json (LlamaHfVocab) whatever else is there
    std::ifstream in(model_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.LoadFromSerializedProto(ss.str()).ok()) throw FormatError(model_path.string() + ": not a SentencePiece model");
    for (int id = 0; id < sp.GetPieceSize() && size_t(id) < n; ++id) {
      v.tokens[size_t(id)] = sp.IdToPiece(id);
      v.scores[size_t(id)] = sp.GetScore(id);
      T t = T::Normal;
      if (sp.IsUnknown(id)) t = T::Unknown;
      else if (sp.IsControl(id)) t = T::Control;
      else if (sp.IsUnused(id)) t = T::Unused;
      else if (sp.IsByte(id)) t = T::Byte;
      v.types[size_t(id)] = int32_t(t);
    }
  } else {
    // The converter's _set_vocab_gpt2: the pieces by id and the merges as
    // they are (no scores), so the file encodes exactly as the folder.
    static const std::regex byte_piece("<0x[0-9A-F]{2}>");
    for (auto it = tj["model"]["vocab"].begin(); it != tj["model"]["vocab"].end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || size_t(id) >= n) continue;
      v.tokens[size_t(id)] = it.key();
      v.types[size_t(id)] = int32_t(std::regex_match(it.key(), byte_piece) ? T::Byte : T::Normal);
    }
    if (tj["model"].contains("merges") && tj["model"]["merges"].is_array())
      for (const json& m : tj["model"]["merges"]) {
        if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
          v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
        else if (m.is_string()) v.merges.push_back(m.get<std::string>());
        else throw FormatError(json_path.string() + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
    v.scores.clear();
  }
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
    for (const json& a : tj["added_tokens"]) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id < 0 || size_t(id) >= n) continue;  // ids past the vocabulary are dropped, as the converter does
      std::string content = a.value("content", std::string());
      // Gemma4Model types these user-defined "so that the chat parser can read them".
      static const std::set<std::string> visible = {"<|channel>",       "<channel|>",        "<|tool_call>", "<tool_call|>",
                                                    "<|tool_response>", "<tool_response|>", "<|\"|>"};
      const bool control = !(gemma4 && visible.count(content)) && (a.value("special", false) || looks_special(content));
      if (!control && !gemma4) {  // user-defined pieces are stored pre-normalized: U+2581 as a space
        for (size_t at; (at = content.find("\xe2\x96\x81")) != std::string::npos;) content.replace(at, 3, " ");
      }
      v.tokens[size_t(id)] = content;
      v.scores[size_t(id)] = -1000.f;
      v.types[size_t(id)] = int32_t(control ? T::Control : T::UserDefined);
    }
  if (gemma4) v.scores.assign(n, -1000.f);
  return v;
}

}  // namespace

namespace {

// Gemma-3's keys (the converter's Gemma3Model): one layer shape, every 6th
// layer full unless the file says otherwise.
void gemma3_keys(const std::string& dir, const ModelConfig& config, GgufMetadata& m) {
  const std::string a = "gemma3.";
  const LayerSpec& first = config.layers.at(0);
  // What llama.cpp cannot be told: its query scale is 1/sqrt(key_length)
  // (1/sqrt(hidden / heads) on the 62-layer model), its sliding window one size.
  const double llama_scale = 1.0 / std::sqrt(double(config.num_layers == 62 ? config.hidden_size / config.num_heads : first.head_dim));
  if (std::abs(config.attn_scale - llama_scale) > 1e-6 * llama_scale)
    throw InputError(dir + ": query_pre_attn_scalar gives a query scale of " + std::to_string(config.attn_scale) +
                     ", which llama.cpp's gemma3 does not use (" + std::to_string(llama_scale) + ")");
  int window = 0;
  std::vector<bool> sliding;
  bool llama_pattern = true;
  for (int i = 0; i < config.num_layers; ++i) {
    const LayerSpec& l = config.layers[size_t(i)];
    if (l.head_dim != first.head_dim || l.num_kv_heads != first.num_kv_heads || l.intermediate_size != first.intermediate_size)
      throw InputError(dir + ": layers of different shapes cannot be written to a gemma3 GGUF");
    sliding.push_back(l.type == LayerType::Sliding);
    if (l.type == LayerType::Sliding) window = l.window;
    llama_pattern = llama_pattern && sliding.back() == ((i + 1) % 6 != 0);
  }
  m.add_u32(a + "feed_forward_length", uint32_t(first.intermediate_size));
  m.add_u32(a + "attention.head_count_kv", uint32_t(first.num_kv_heads));
  m.add_u32(a + "attention.key_length", uint32_t(first.head_dim));
  m.add_u32(a + "attention.value_length", uint32_t(first.head_dim));
  if (window > 0) m.add_u32(a + "attention.sliding_window", uint32_t(window));
  // llama.cpp's gemma3 makes every 6th layer full; another layout is said
  // per layer (true: sliding), which splitdec reads and llama.cpp ignores.
  if (window > 0 && !llama_pattern) m.add_bools(a + "attention.sliding_window_pattern", sliding);
}

// Gemma-4's keys (the converter's Gemma4Model): per-layer arrays where
// layers differ, both head sizes, every layer's type, and the parts E2B /
// E4B and 26B-A4B add.
void gemma4_keys(const ModelConfig& config, GgufMetadata& m) {
  const std::string a = "gemma4.";
  const int n = config.num_layers;
  int head_full = 0, head_swa = 0, window = 0, shared = 0, experts = 0, top_k = 0, expert_width = 0;
  std::vector<bool> sliding;
  std::vector<int32_t> ff, kv;  // arrays of int32, as gguf-py writes Python ints
  for (int i = 0; i < n; ++i) {
    const LayerSpec& l = config.layers[size_t(i)];
    sliding.push_back(l.type == LayerType::Sliding);
    (l.type == LayerType::Sliding ? head_swa : head_full) = l.head_dim;
    if (l.type == LayerType::Sliding) window = l.window;
    ff.push_back(l.intermediate_size);
    kv.push_back(l.num_kv_heads);
    shared += config.is_kv_shared(i) ? 1 : 0;
    experts = l.num_experts, top_k = l.top_k_experts, expert_width = l.expert_intermediate_size;
  }
  if (head_swa == 0) head_swa = head_full;
  auto one_value = [](const std::vector<int32_t>& v) { return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end(); };
  if (one_value(ff)) m.add_u32(a + "feed_forward_length", uint32_t(ff[0]));
  else m.add_i32s(a + "feed_forward_length", ff);
  if (one_value(kv)) m.add_u32(a + "attention.head_count_kv", uint32_t(kv[0]));
  else m.add_i32s(a + "attention.head_count_kv", kv);
  m.add_u32(a + "attention.key_length", uint32_t(head_full));
  m.add_u32(a + "attention.value_length", uint32_t(head_full));
  m.add_u32(a + "attention.key_length_swa", uint32_t(head_swa));
  m.add_u32(a + "attention.value_length_swa", uint32_t(head_swa));
  m.add_u32(a + "rope.dimension_count", uint32_t(head_full));
  m.add_u32(a + "rope.dimension_count_swa", uint32_t(head_swa));
  m.add_u32(a + "attention.sliding_window", uint32_t(window));  // llama.cpp's gemma4 requires the key
  m.add_bools(a + "attention.sliding_window_pattern", sliding);
  if (const std::string why = gemma4_kv_sharing_mismatch(sliding, shared); !why.empty())
    throw InputError("cannot write this Gemma-4 model to GGUF: " + why);
  m.add_u32(a + "attention.shared_kv_layers", uint32_t(shared));
  m.add_u32(a + "embedding_length_per_layer_input", uint32_t(config.per_layer_dim));
  if (experts > 0) {
    m.add_u32(a + "expert_count", uint32_t(experts));
    m.add_u32(a + "expert_used_count", uint32_t(top_k));
    m.add_u32(a + "expert_feed_forward_length", uint32_t(expert_width));
  }
}

// The converter's rope_freqs for Gemma-4's full layers: 1 for each rotated
// pair, 1e30 for the others (ggml divides the angle by it).
std::vector<float> gemma4_rope_freqs(const ModelConfig& config) {
  for (const LayerSpec& l : config.layers)
    if (l.type == LayerType::Full) {
      std::vector<float> f;
      for (float inv : l.inv_freq) f.push_back(inv > 0 ? 1.f : 1e30f);
      return f;
    }
  return {};
}

}  // namespace

void check_gguf_weights(const std::string& weights) { types_named(weights); }

GgufExportSummary export_gguf(const GgufExportOptions& o) {
  const Types types = types_named(o.weights);
  if (is_gguf_path(o.model_dir))
    throw InputError("--model " + o.model_dir + " is a GGUF; quantize writes a GGUF from a model folder");
  const ModelConfig config = load_model_config(o.model_dir);
  if (config.family != Family::Gemma3 && config.family != Family::Gemma4)
    throw InputError(o.model_dir + ": " + config.model_type + " models are not written to GGUF (Gemma-3 and Gemma-4 ones are)");
  const bool gemma4 = config.family == Family::Gemma4;
  const TensorStore store = TensorStore::open_dir(o.model_dir);
  const std::string prefix = find_decoder_prefix(store);
  const json h = hparams_of(o.model_dir);
  const std::string arch = gemma4 ? "gemma4" : "gemma3", a = arch + ".";

  GgufMetadata m;
  m.add_string("general.architecture", arch);
  m.add_string("general.type", "model");
  fs::path folder(o.model_dir);  // its name, as the converter names a model without a model card
  if (!folder.has_filename()) folder = folder.parent_path();  // "dir/"
  m.add_string("general.name", folder.filename().string());
  m.add_u32(a + "block_count", uint32_t(config.num_layers));
  m.add_u32(a + "context_length", uint32_t(number_or(h, "max_position_embeddings", 131072)));
  m.add_u32(a + "embedding_length", uint32_t(config.hidden_size));
  m.add_u32(a + "attention.head_count", uint32_t(config.num_heads));
  const Rope rope = rope_of(h);
  if (rope.linear_factor) {
    if (gemma4) throw InputError(o.model_dir + ": linear RoPE scaling cannot be written to a gemma4 GGUF");
    m.add_string(a + "rope.scaling.type", "linear");
    m.add_f32(a + "rope.scaling.factor", float(*rope.linear_factor));
  }
  m.add_f32(a + "rope.freq_base", float(rope.theta));
  m.add_f32(a + "rope.freq_base_swa", float(rope.local_theta));
  m.add_f32(a + "attention.layer_norm_rms_epsilon", config.rms_norm_eps);
  m.add_u32("general.file_type", types.file_type);
  if (config.final_logit_softcap) m.add_f32(a + "final_logit_softcapping", *config.final_logit_softcap);
  if (gemma4) gemma4_keys(config, m);
  else gemma3_keys(o.model_dir, config, m);
  m.add_u32("general.quantization_version", 2);

  const Vocabulary vocab = vocabulary_of(o.model_dir, config.vocab_size, gemma4);
  const std::string tokenizer = gemma4 ? "gemma4" : !vocab.scores.empty() ? "llama" : "gpt2";
  m.add_string("tokenizer.ggml.model", tokenizer);
  if (!gemma4) m.add_string("tokenizer.ggml.pre", "default");
  m.add_strings("tokenizer.ggml.tokens", vocab.tokens);
  if (!vocab.scores.empty()) m.add_f32s("tokenizer.ggml.scores", vocab.scores);
  m.add_i32s("tokenizer.ggml.token_type", vocab.types);
  if (tokenizer != "llama") m.add_strings("tokenizer.ggml.merges", vocab.merges);
  m.add_u32("tokenizer.ggml.bos_token_id", uint32_t(config.bos_token_id));
  m.add_u32("tokenizer.ggml.eos_token_id", uint32_t(config.eos_token_ids.at(0)));
  if (const auto unk = std::find(vocab.tokens.begin(), vocab.tokens.end(), "<unk>"); unk != vocab.tokens.end())
    m.add_u32("tokenizer.ggml.unknown_token_id", uint32_t(unk - vocab.tokens.begin()));
  m.add_u32("tokenizer.ggml.padding_token_id", uint32_t(config.pad_token_id));
  const fs::path tc_path = fs::path(o.model_dir) / "tokenizer_config.json";
  const json tc = fs::exists(tc_path) ? read_json_file(tc_path) : json::object();
  if (gemma4) m.add_bool("tokenizer.ggml.add_bos_token", true);
  else if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
    m.add_bool("tokenizer.ggml.add_bos_token", tc["add_bos_token"].get<bool>());
  if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean()) m.add_bool("tokenizer.ggml.add_eos_token", tc["add_eos_token"].get<bool>());
  if (o.chat_template) m.add_string("tokenizer.chat_template", *o.chat_template);
  m.add_bool("tokenizer.ggml.add_space_prefix", false);

  // The tensors: the decoder's, in the loader's order, under llama.cpp's names.
  struct Plan {
    TensorView view;  // experts flattened to [experts * rows, in]
    std::string name;
    uint32_t type;
    bool norm;
    std::vector<float> generated;  // a tensor the converter makes (rope_freqs), written as F32
  };
  std::vector<Plan> plans;
  std::vector<GgufWriter::Entry> entries;
  GgufExportSummary summary;
  // The router in the checkpoint's float type where the weights type is a
  // block one: its top-k would flip with rounding (llama.cpp keeps it float).
  auto float_type = [&](DType d) {
    if (types.matrix == ggml_type::F32 || types.matrix == ggml_type::F16 || types.matrix == ggml_type::BF16) return types.matrix;
    return d == DType::BF16 ? ggml_type::BF16 : d == DType::F16 ? ggml_type::F16 : ggml_type::F32;
  };
  auto plan = [&](const std::string& source, const std::string& gguf_name, WeightSpec::Kind kind) {
    const TensorView& v = store.get(source);
    if (!dtype_is_float(v.dtype))
      throw InputError("--model " + o.model_dir + " is quantized already (tensor '" + source + "' is " + dtype_name(v.dtype) +
                       "); write the GGUF from the float checkpoint");
    uint32_t type = ggml_type::F32;
    if (kind == WeightSpec::Linear || kind == WeightSpec::Embedding) {
      type = type_for_rows(kind == WeightSpec::Embedding ? types.embedding : types.matrix, v.shape[1]);
    } else if (kind == WeightSpec::Experts) {
      type = type_for_rows(types.matrix, v.shape.back());
    } else if (kind == WeightSpec::MappedTable) {  // llama-quantize: the token embedding's type
      type = type_for_rows(types.embedding, v.shape[1]);
    } else if (kind == WeightSpec::Router) {
      type = float_type(v.dtype);
    }
    std::vector<uint64_t> ne(v.shape.rbegin(), v.shape.rend());
    entries.push_back({gguf_name, type, ne});
    TensorView flat = v;
    if (kind == WeightSpec::Experts) flat.shape = {v.shape[0] * v.shape[1], v.shape[2]};
    plans.push_back({flat, gguf_name, type, kind == WeightSpec::Norm || kind == WeightSpec::Scalar, {}});
    summary.bytes_in += v.nbytes;
    summary.bytes_out += GgufWriter::tensor_bytes(type, ne);
  };
  if (gemma4) {
    Plan freqs{TensorView{}, "rope_freqs.weight", ggml_type::F32, false, gemma4_rope_freqs(config)};
    if (!freqs.generated.empty()) {
      entries.push_back({freqs.name, ggml_type::F32, {uint64_t(freqs.generated.size())}});
      summary.bytes_out += freqs.generated.size() * 4;
      plans.push_back(std::move(freqs));
    }
  }
  for (const WeightSpec& s : decoder_weight_specs(config)) {
    if (s.optional && !store.find(prefix + s.name)) continue;
    if (s.kind == WeightSpec::Scalar && !gemma4) throw InputError(o.model_dir + ": per-layer scalars cannot be written to a gemma3 GGUF");
    plan(prefix + s.name, gguf_tensor_name(s.name), s.kind);
  }
  if (!config.tie_word_embeddings) {
    const std::string head = store.find("lm_head.weight") ? "lm_head.weight" : "language_model.lm_head.weight";
    plan(head, "output.weight", WeightSpec::Embedding);
  }

  GgufWriter out(o.out_path, m, entries);
  std::vector<uint8_t> bytes;
  for (size_t k = 0; k < plans.size(); ++k) {
    if (o.progress) o.progress(k, plans.size());
    const Plan& p = plans[k];
    const TensorView& v = p.view;
    if (!p.generated.empty()) {
      out.write(p.generated.data(), p.generated.size() * 4);
      continue;
    }
    if (p.norm || v.shape.size() != 2) {
      // Norms as the converter stores them: f32, 1 + w for Gemma's (1 + w)
      // RMSNorm, added in f32 (in f16 for an f16 checkpoint: it converts
      // only other types to f32 first).
      std::vector<float> values = v.to_f32();
      if (p.norm && config.norm_adds_one)
        for (float& x : values) x = v.dtype == DType::F16 ? round_to_dtype(x + 1.f, DType::F16) : x + 1.f;
      out.write(values.data(), values.size() * 4);
      continue;
    }
    const int rows = int(v.shape[0]), in = int(v.shape[1]);
    if (GgmlBlocks g; ggml_blocks_of_type(p.type, &g)) {  // llama.cpp's blocks, from f32 a piece at a time
      const size_t row_bytes = size_t(in / ggml_block_layout(g).values) * ggml_block_layout(g).bytes;
      for (int r0 = 0, step = convert_piece_rows(in); r0 < rows; r0 += step) {
        const int n = std::min(step, rows - r0);
        WeightMatrix piece = WeightMatrix::zeros(WeightFormat::F32, n, in);
        convert_rows(store, v, r0, n, piece, 0);
        bytes.assign(size_t(n) * row_bytes, 0);
        const float* f32 = reinterpret_cast<const float*>(piece.data.data());
        try {
          for (int r = 0; r < n; ++r) quantize_ggml_blocks(g, f32 + size_t(r) * size_t(in), bytes.data() + size_t(r) * row_bytes, in);
        } catch (const InputError& e) {
          throw InputError("tensor '" + v.name + "' cannot be written as " + ggml_type_name(p.type) + ": " + e.what());
        }
        out.write(bytes.data(), bytes.size());
      }
      continue;
    }
    for (int r0 = 0, step = convert_piece_rows(in); r0 < rows; r0 += step) {
      const int n = std::min(step, rows - r0);
      WeightMatrix piece = WeightMatrix::zeros(format_of(p.type), n, in);
      convert_rows(store, v, r0, n, piece, 0);
      out.write(piece.data.data(), piece.data.size());
    }
  }
  if (o.progress) o.progress(plans.size(), plans.size());
  out.finish();
  summary.tensors = int(plans.size());
  return summary;
}

}  // namespace splitdec
