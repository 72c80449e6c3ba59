// The Gemma-4 checkpoints beyond the dense ones: E2B / E4B (per-layer
// embeddings, KV-shared layers, double-wide MLP, causal) and 26B-A4B
// (mixture of experts). Their configs load as transformers writes them; the
// fast per-layer-embedding and expert paths match float64 references; the
// checkpoints a test writes itself in Hugging Face's layout (names listed
// here by hand, not taken from the loader) run every plan like the
// reference. The tiny presets also run the whole plan suite (test_session,
// test_sequences).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "generate/generator.h"
#include "generate/reference_source.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/embedding.h"
#include "model/mixture_of_experts.h"
#include "model/per_layer_embeddings.h"
#include "model/reference_gemma4_layers.h"
#include "pipeline/session.h"
#include "test_prompts.h"
#include "test_support.h"

using namespace splitdec;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json layer_types(int n, int pattern) {
  json t = json::array();
  for (int i = 0; i < n; ++i) t.push_back((i + 1) % pattern == 0 || i == n - 1 ? "full_attention" : "sliding_attention");
  return t;
}

// A Gemma4ForConditionalGeneration config.json as transformers saves it
// (text fields nested, the class defaults written out).
json hf_config(json text) {
  json t = {{"model_type", "gemma4_text"},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"initializer_range", 0.02},
            {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-6},
            {"use_cache", true},
            {"pad_token_id", 0},
            {"eos_token_id", 1},
            {"bos_token_id", 2},
            {"tie_word_embeddings", true},
            {"final_logit_softcapping", 30.0},
            {"rope_parameters",
             {{"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}},
              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}},
            {"vocab_size_per_layer_input", 262144},
            {"hidden_size_per_layer_input", 0},
            {"num_global_key_value_heads", nullptr},
            {"global_head_dim", 512},
            {"attention_k_eq_v", false},
            {"num_kv_shared_layers", 0},
            {"enable_moe_block", false},
            {"use_double_wide_mlp", false},
            {"num_experts", nullptr},
            {"top_k_experts", nullptr},
            {"moe_intermediate_size", nullptr},
            {"use_bidirectional_attention", nullptr},
            {"head_dim", 256},
            {"sliding_window", 512}};
  t.update(text);
  return {{"architectures", {"Gemma4ForConditionalGeneration"}},
          {"model_type", "gemma4"},
          {"text_config", t},
          {"vision_config", nullptr},
          {"audio_config", nullptr},
          {"boi_token_id", 255999},
          {"eoi_token_id", 258882},
          {"image_token_id", 258880},
          {"video_token_id", 258884},
          {"boa_token_id", 256000},
          {"eoa_token_index", 258883},
          {"audio_token_id", 258881},
          {"vision_soft_tokens_per_image", 280},
          {"tie_word_embeddings", true},
          {"transformers_version", "5.0.0"}};
}

json e2b_text() {
  return {{"hidden_size", 1536},         {"hidden_size_per_layer_input", 256}, {"intermediate_size", 6144},
          {"num_hidden_layers", 35},     {"layer_types", layer_types(35, 5)},  {"num_attention_heads", 8},
          {"num_key_value_heads", 1},    {"num_kv_shared_layers", 20},         {"use_double_wide_mlp", true},
          {"vocab_size", 262144}};
}
json e4b_text() {
  return {{"hidden_size", 2560},      {"hidden_size_per_layer_input", 256}, {"intermediate_size", 10240},
          {"num_hidden_layers", 42},  {"layer_types", layer_types(42, 6)},  {"num_attention_heads", 8},
          {"num_key_value_heads", 2}, {"num_kv_shared_layers", 18},         {"vocab_size", 262144}};
}
json a4b_text() {
  return {{"hidden_size", 2816},          {"intermediate_size", 2112},       {"num_hidden_layers", 30},
          {"layer_types", layer_types(30, 6)}, {"num_attention_heads", 16},  {"num_key_value_heads", 8},
          {"num_global_key_value_heads", 2},   {"attention_k_eq_v", true},   {"use_bidirectional_attention", "vision"},
          {"enable_moe_block", true},     {"num_experts", 128},             {"moe_intermediate_size", 704},
          {"top_k_experts", 8},           {"sliding_window", 1024},         {"vocab_size", 262144}};
}

}  // namespace

TEST(Gemma4Lineup, E2bConfigLoadsAsTransformersWritesIt) {
  const ModelConfig c = parse_model_config(hf_config(e2b_text()), "e2b");
  EXPECT_EQ(c.per_layer_dim, 256);
  EXPECT_EQ(c.per_layer_vocab, 262144);
  EXPECT_EQ(c.default_policy, MaskPolicy::Causal);
  ASSERT_EQ(c.num_layers, 35);
  for (int l = 0; l < 35; ++l) {
    const LayerSpec& L = c.layers[size_t(l)];
    EXPECT_EQ(L.type, (l + 1) % 5 == 0 ? LayerType::Full : LayerType::Sliding) << l;
    EXPECT_EQ(L.head_dim, L.type == LayerType::Full ? 512 : 256) << l;
    EXPECT_EQ(L.intermediate_size, l >= 15 ? 12288 : 6144) << l;  // double-wide on the KV-shared layers
    // Shared layers read the last owning layer of their type: 13 (sliding), 14 (full).
    EXPECT_EQ(L.kv_source, l < 15 ? l : (L.type == LayerType::Full ? 14 : 13)) << l;
    EXPECT_EQ(L.num_experts, 0);
  }
}

TEST(Gemma4Lineup, E4bConfigLoadsAsTransformersWritesIt) {
  const ModelConfig c = parse_model_config(hf_config(e4b_text()), "e4b");
  EXPECT_EQ(c.per_layer_dim, 256);
  ASSERT_EQ(c.num_layers, 42);
  EXPECT_EQ(c.layers[23].kv_source, 23);
  EXPECT_EQ(c.layers[24].kv_source, 22);  // sliding, shares layer 22's K/V
  EXPECT_EQ(c.layers[41].kv_source, 23);  // full
  EXPECT_EQ(c.layers[41].intermediate_size, 10240);
}

TEST(Gemma4Lineup, A4bConfigLoadsAsTransformersWritesIt) {
  const ModelConfig c = parse_model_config(hf_config(a4b_text()), "26b-a4b");
  EXPECT_EQ(c.per_layer_dim, 0);
  EXPECT_EQ(c.default_policy, MaskPolicy::Gemma4);
  for (const LayerSpec& L : c.layers) {
    EXPECT_EQ(L.num_experts, 128);
    EXPECT_EQ(L.top_k_experts, 8);
    EXPECT_EQ(L.expert_intermediate_size, 704);
    EXPECT_EQ(L.intermediate_size, 2112);
    EXPECT_EQ(L.k_eq_v, L.type == LayerType::Full);
    EXPECT_EQ(L.num_kv_heads, L.type == LayerType::Full ? 2 : 8);
    EXPECT_EQ(L.window, L.type == LayerType::Full ? 0 : 1024);
  }
}

TEST(Gemma4Lineup, UnsupportedOrIncompleteFieldsAreNamed) {
  auto message = [](json text) {
    try {
      parse_model_config(hf_config(std::move(text)), "cfg");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json t = a4b_text();
  t["num_experts"] = nullptr;
  EXPECT_NE(message(t).find("num_experts"), std::string::npos) << message(t);
  t = a4b_text();
  t["top_k_experts"] = 200;
  EXPECT_NE(message(t).find("top_k_experts"), std::string::npos) << message(t);
  t = e2b_text();
  t["hidden_size_per_layer_input"] = -1;
  EXPECT_NE(message(t).find("hidden_size_per_layer_input"), std::string::npos) << message(t);
  t = e2b_text();
  t["vocab_size_per_layer_input"] = 1000;
  EXPECT_NE(message(t).find("vocab_size_per_layer_input"), std::string::npos) << message(t);
  t = e2b_text();
  t["pad_token_id"] = 262144;
  EXPECT_NE(message(t).find("pad_token_id"), std::string::npos) << message(t);
  t = a4b_text();
  t["moe_intermediate_size"] = 1 << 29;
  EXPECT_NE(message(t).find("moe_intermediate_size"), std::string::npos) << message(t);
  t = e2b_text();
  t["use_bidirectional_attention"] = "all";
  EXPECT_NE(message(t).find("use_bidirectional_attention"), std::string::npos) << message(t);
  // Gemma-3n is another family: its model_type is named with the ones that are supported.
  json n = hf_config(e2b_text());
  n["model_type"] = "gemma3n";
  try {
    parse_model_config(n, "cfg");
    FAIL() << "gemma3n accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemma3n"), std::string::npos) << e.what();
  }
}

namespace {

std::vector<float> random_rows(int rows, int n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(size_t(rows) * size_t(n));
  for (float& x : v) x = d(g);
  return v;
}

template <class A, class B>
double relative_rms(const A& got, const B& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - double(want[i])) * (double(got[i]) - double(want[i]));
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <class A, class B>
double max_abs(const A& got, const B& want) {
  double m = 0;
  for (size_t i = 0; i < want.size(); ++i) m = std::max(m, std::fabs(double(got[i]) - double(want[i])));
  return m;
}

}  // namespace

TEST(Gemma4Lineup, PerLayerInputsMatchTheFloat64Reference) {
  const Model& m = test::tiny_model("tiny-gemma4-ple");
  const ModelConfig& c = m.config();
  ASSERT_GT(c.per_layer_dim, 0);
  for (int rows : {1, 3, 20}) {  // 20: the projection takes the GEMM path
    std::vector<int> tokens(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) tokens[size_t(r)] = (r * 37 + 5) % c.per_layer_vocab;
    tokens[0] = c.per_layer_vocab - 1;  // the table's last row
    const std::vector<float> e = random_rows(rows, c.hidden_size, uint32_t(rows));
    for (bool independent : {false, true}) {
      std::vector<float> got(size_t(c.num_layers) * size_t(rows) * size_t(c.per_layer_dim));
      m.per_layer_inputs(tokens.data(), e.data(), rows, got.data(), independent);
      const std::vector<double> want = ref::per_layer_inputs(c, m.weights(), tokens.data(), e.data(), rows);
      EXPECT_LE(max_abs(got, want), 1e-4) << rows;
      EXPECT_LE(relative_rms(got, want), 1e-5) << rows;
    }
    // Each layer's term added to the residual stream.
    const std::vector<double> input = ref::per_layer_inputs(c, m.weights(), tokens.data(), e.data(), rows);
    std::vector<float> input_f(input.begin(), input.begin() + long(rows) * c.per_layer_dim);
    std::vector<float> h = random_rows(rows, c.hidden_size, 99);
    const std::vector<double> want = ref::add_per_layer_input(c, m.weights().layers[0], input.data(), h.data(), rows);
    add_per_layer_input(c, m.weights().layers[0], input_f.data(), h.data(), rows, false);
    EXPECT_LE(max_abs(h, want), 1e-4) << rows;
  }
  int past = c.per_layer_vocab;
  std::vector<float> e(size_t(c.hidden_size)), out(size_t(c.num_layers) * size_t(c.per_layer_dim));
  EXPECT_THROW(m.per_layer_inputs(&past, e.data(), 1, out.data()), InputError);
}

TEST(Gemma4Lineup, MediaRowsReadThePadRowOfTheTable) {
  // Hugging Face replaces media placeholders by pad before the per-layer
  // lookup, and projects the media row's own embedding.
  const Model& m = test::tiny_model("tiny-gemma4-ple");
  const ModelConfig& c = m.config();
  test::SeqBuilder s(c, 3);
  s.text(2).media(Modality::Image, 4).text(2);
  const PromptBatch p = test::batch_of({s}, c.pad_token_id);
  const std::vector<float> hidden = embed_prompt(m, p);
  const std::vector<float> per_layer = embed_per_layer(m, p, hidden);
  const int rows = int(p.rows()), P = c.per_layer_dim;
  std::vector<int> ids(p.tokens.begin(), p.tokens.end());
  for (int r = 0; r < rows; ++r)
    if (p.modality[size_t(r)] != Modality::Text) ids[size_t(r)] = c.pad_token_id;
  const std::vector<double> want = ref::per_layer_inputs(c, m.weights(), ids.data(), hidden.data(), rows);
  EXPECT_LE(max_abs(per_layer, want), 1e-4);
  // And not the placeholder token's row.
  std::vector<double> placeholder = ref::per_layer_inputs(c, m.weights(), p.tokens.data(), hidden.data(), rows);
  int media_row = 0;
  while (media_row < rows && p.modality[size_t(media_row)] == Modality::Text) ++media_row;
  ASSERT_LT(media_row, rows);
  double differs = 0;
  for (int k = 0; k < P; ++k)
    differs = std::max(differs, std::fabs(placeholder[size_t(media_row) * P + size_t(k)] - want[size_t(media_row) * P + size_t(k)]));
  EXPECT_GT(differs, 1e-3);
}

TEST(Gemma4Lineup, ExpertsMatchTheFloat64Reference) {
  const Model& m = test::tiny_model("tiny-gemma4-moe");
  const ModelConfig& c = m.config();
  for (int layer : {0, c.num_layers - 1}) {
    const LayerSpec& spec = c.layers[size_t(layer)];
    ASSERT_GT(spec.num_experts, 0);
    for (int rows : {1, 3, 17, 40}) {  // 17, 40: experts see GEMM-sized groups
      const std::vector<float> residual = random_rows(rows, c.hidden_size, uint32_t(rows), 2.f);
      const std::vector<float> input = random_rows(rows, c.hidden_size, uint32_t(rows + 100));
      const std::vector<double> want = ref::mixture_of_experts(c, spec, m.weights().layers[size_t(layer)], residual.data(),
                                                               input.data(), rows);
      for (bool independent : {false, true}) {
        std::vector<float> got(size_t(rows) * size_t(c.hidden_size));
        mixture_of_experts(c, spec, m.weights().layers[size_t(layer)], residual.data(), input.data(), rows, got.data(),
                           independent);
        EXPECT_LE(max_abs(got, want), 1e-4) << "layer " << layer << ", rows " << rows;
      }
      // The router keeps top_k distinct experts per row.
      for (const ExpertChoice& ch : route_to_experts(c, spec, m.weights().layers[size_t(layer)], residual.data(), rows, false)) {
        ASSERT_EQ(int(ch.experts.size()), spec.top_k_experts);
        for (size_t k = 1; k < ch.experts.size(); ++k) EXPECT_LT(ch.experts[k - 1], ch.experts[k]);
      }
    }
  }
}

namespace {

// Random tensors under the names transformers gives Gemma4ForConditionalGeneration,
// listed here by hand from modeling_gemma4.py's module tree.
struct HfTensors {
  std::vector<TensorToWrite> list;
  std::mt19937 g{7};
  void add(const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<uint8_t> bytes(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = offset + scale * u(g);
      std::memcpy(bytes.data() + size_t(i) * 4, &v, 4);
    }
    list.push_back({name, DType::F32, std::move(shape), std::move(bytes)});
  }
  void linear(const std::string& name, int64_t out, int64_t in) { add(name, {out, in}, std::sqrt(3.f / float(in))); }
  void norm(const std::string& name, int64_t n) { add(name, {n}, 0.1f, 1.f); }
};

struct TinyHf {
  int vocab = 300, H = 64, heads = 4, kv = 2, hd = 16, ghd = 32, I = 96, layers = 6, P = 0, shared = 0;
  bool k_eq_v = false, double_wide = false;
  int experts = 0, top_k = 0, X = 0;
};

std::string write_hf_checkpoint(const TinyHf& t, const std::string& name) {
  json text = {{"vocab_size", t.vocab},
               {"hidden_size", t.H},
               {"intermediate_size", t.I},
               {"num_hidden_layers", t.layers},
               {"layer_types", layer_types(t.layers, 3)},
               {"num_attention_heads", t.heads},
               {"num_key_value_heads", t.kv},
               {"head_dim", t.hd},
               {"global_head_dim", t.ghd},
               {"sliding_window", 8},
               {"hidden_size_per_layer_input", t.P},
               {"vocab_size_per_layer_input", t.vocab},
               {"num_kv_shared_layers", t.shared},
               {"use_double_wide_mlp", t.double_wide},
               {"attention_k_eq_v", t.k_eq_v}};
  if (t.k_eq_v) text["num_global_key_value_heads"] = 1;
  if (t.experts) {
    text.update({{"enable_moe_block", true}, {"num_experts", t.experts}, {"top_k_experts", t.top_k},
                 {"moe_intermediate_size", t.X}, {"use_bidirectional_attention", "vision"}});
  }
  json cfg = hf_config(text);
  // A vocabulary this small holds no real media ids: put them at its top.
  cfg.update({{"boi_token_id", 290}, {"eoi_token_id", 291}, {"image_token_id", 292}, {"video_token_id", 293},
              {"boa_token_id", 294}, {"eoa_token_index", 295}, {"audio_token_id", 296}});
  const std::string dir = test::temp_dir(name);
  std::ofstream(dir + "/config.json") << cfg.dump(2);

  HfTensors w;
  const std::string p = "model.language_model.";
  w.add(p + "embed_tokens.weight", {t.vocab, t.H}, std::sqrt(3.f / float(t.H)));
  const int first_shared = t.layers - t.shared;
  for (int l = 0; l < t.layers; ++l) {
    const std::string L = p + "layers." + std::to_string(l) + ".";
    const bool full = (l + 1) % 3 == 0 || l == t.layers - 1;
    const int hd = full ? t.ghd : t.hd, kvh = full && t.k_eq_v ? 1 : t.kv;
    const bool shared = l >= first_shared && t.shared > 0;
    const int I = shared && t.double_wide ? 2 * t.I : t.I;
    w.linear(L + "self_attn.q_proj.weight", t.heads * hd, t.H);
    w.add(L + "self_attn.q_norm.weight", {hd}, 0.1f, 2.f / std::sqrt(float(hd)));
    if (!shared) {
      w.linear(L + "self_attn.k_proj.weight", kvh * hd, t.H);
      if (!(full && t.k_eq_v)) w.linear(L + "self_attn.v_proj.weight", kvh * hd, t.H);
      w.norm(L + "self_attn.k_norm.weight", hd);
    }
    w.linear(L + "self_attn.o_proj.weight", t.H, t.heads * hd);
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      w.norm(L + n + ".weight", t.H);
    w.linear(L + "mlp.gate_proj.weight", I, t.H);
    w.linear(L + "mlp.up_proj.weight", I, t.H);
    w.linear(L + "mlp.down_proj.weight", t.H, I);
    w.add(L + "layer_scalar", {1}, 0.2f, 0.8f);
    if (t.P) {
      w.linear(L + "per_layer_input_gate.weight", t.P, t.H);
      w.linear(L + "per_layer_projection.weight", t.H, t.P);
      w.norm(L + "post_per_layer_input_norm.weight", t.H);
    }
    if (t.experts) {
      w.linear(L + "router.proj.weight", t.experts, t.H);
      w.norm(L + "router.scale", t.H);
      w.norm(L + "router.per_expert_scale", t.experts);
      w.add(L + "experts.gate_up_proj", {t.experts, 2 * t.X, t.H}, std::sqrt(3.f / float(t.H)));
      w.add(L + "experts.down_proj", {t.experts, t.H, t.X}, std::sqrt(3.f / float(t.X)));
      for (const char* n : {"pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"})
        w.norm(L + n + ".weight", t.H);
    }
  }
  if (t.P) {
    w.add(p + "embed_tokens_per_layer.weight", {t.vocab, int64_t(t.layers) * t.P}, std::sqrt(3.f / float(t.P)));
    w.linear(p + "per_layer_model_projection.weight", int64_t(t.layers) * t.P, t.H);
    w.norm(p + "per_layer_projection_norm.weight", t.P);
  }
  w.norm(p + "norm.weight", t.H);
  write_safetensors(dir + "/model.safetensors", w.list, {{"format", "pt"}});
  return dir;
}

void expect_plans_match_reference(const Model& m, const std::string& what) {
  const ModelConfig& c = m.config();
  test::SeqBuilder s(c, 11);
  s.text(3).media(Modality::Image, 9).text(4);
  const std::vector<Turn> turns{{test::batch_of({s}, c.pad_token_id), 5}};
  const GenerationResult want = reference_generate(m, turns, c.default_policy);
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified})
    for (int chunk : {4, 64}) {
      SessionOptions o;
      o.plan = plan;
      o.chunk = chunk;
      o.capacity = 64;
      o.policy = c.default_policy;
      Session session(m, 1, o);
      const GenerationResult got = generate_greedy(session, turns);
      const std::string at = what + ", plan " + plan_name(plan) + ", chunk " + std::to_string(chunk);
      EXPECT_EQ(got.tokens, want.tokens) << at;
      EXPECT_LE(max_abs(got.prompt_logits, want.prompt_logits), 1e-4) << at;
      EXPECT_LE(max_abs(got.step_logits, want.step_logits), 1e-4) << at;
    }
}

}  // namespace

TEST(Gemma4Lineup, HfLayoutPerLayerEmbeddingCheckpointRunsEveryPlan) {
  TinyHf t;
  t.P = 16;
  t.shared = 2;
  t.double_wide = true;
  const Model m = Model::load(write_hf_checkpoint(t, "hf-e2b-like"));
  EXPECT_EQ(m.config().per_layer_dim, 16);
  EXPECT_FALSE(m.weights().per_layer_table.empty());
  // The table's rows are the file's rows (checked against the tensor as written).
  const TensorStore raw = TensorStore::open_dir(write_hf_checkpoint(t, "hf-e2b-like-raw"));
  const std::vector<float> table = raw.get("model.language_model.embed_tokens_per_layer.weight").to_f32();
  std::vector<float> row(size_t(t.layers) * size_t(t.P));
  for (int token : {0, 1, 137, t.vocab - 1}) {
    m.weights().per_layer_table.row_f32(token, row.data());
    EXPECT_TRUE(std::equal(row.begin(), row.end(), table.begin() + long(token) * long(row.size()))) << token;
  }
  expect_plans_match_reference(m, "per-layer embeddings");
}

TEST(Gemma4Lineup, HfLayoutExpertCheckpointRunsEveryPlan) {
  TinyHf t;
  t.k_eq_v = true;
  t.experts = 8;
  t.top_k = 2;
  t.X = 32;
  const Model m = Model::load(write_hf_checkpoint(t, "hf-a4b-like"));
  EXPECT_EQ(m.config().layers[0].num_experts, 8);
  ASSERT_EQ(m.weights().layers[0].expert_gate_up.size(), 8u);
  // Each expert's matrices are its slice of the stacks as written: [e, o, :].
  const TensorStore raw = TensorStore::open_dir(write_hf_checkpoint(t, "hf-a4b-like-raw"));
  for (const char* stack : {"gate_up_proj", "down_proj"}) {
    const std::vector<float> all = raw.get(std::string("model.language_model.layers.2.experts.") + stack).to_f32();
    const std::vector<WeightMatrix>& each =
        std::string(stack) == "gate_up_proj" ? m.weights().layers[2].expert_gate_up : m.weights().layers[2].expert_down;
    for (int e : {0, 5, 7}) {
      const WeightMatrix& w = each[size_t(e)];
      std::vector<float> row(size_t(w.in));
      for (int o : {0, w.out / 2, w.out - 1}) {
        w.row_f32(o, row.data());
        const long at = (long(e) * w.out + o) * w.in;
        EXPECT_TRUE(std::equal(row.begin(), row.end(), all.begin() + at)) << stack << " expert " << e << " row " << o;
      }
    }
  }
  expect_plans_match_reference(m, "experts");
}

TEST(Gemma4Lineup, MissingOrMisshapenExpertTensorsAreNamed) {
  TinyHf t;
  t.experts = 4;
  t.top_k = 2;
  t.X = 16;
  const std::string dir = write_hf_checkpoint(t, "hf-a4b-bad");
  json cfg = json::parse(test::read_file(dir + "/config.json"));
  cfg["text_config"]["moe_intermediate_size"] = 24;  // the file holds 16
  std::ofstream(dir + "/config.json") << cfg.dump();
  try {
    Model::load(dir);
    FAIL() << "loaded";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("experts.gate_up_proj"), std::string::npos) << e.what();
  }
}

TEST(Gemma4Lineup, ExportsThatCannotWriteTheNewPiecesSaySo) {
  // Per-layer embeddings export (tests/test_onnx_export.cpp runs them); experts do not.
  const test::CommandResult r =
      test::run_splitdec("export-onnx --model " + test::tiny_model_dir("tiny-gemma4-moe") + " --out " + test::temp_dir("no-onnx"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("mixture of experts"), std::string::npos) << r.output;
  // Both write to GGUF (tests/test_gguf.cpp, Gemma4*).
}

// E2B / E4B hear: a WAV through the conformer tower into a per-layer
// embedding model (its audio rows read pad's table row), every plan giving
// the reference's tokens.
TEST(Gemma4Lineup, AudioFileThroughThePerLayerEmbeddingModel) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4-ple");
  const std::string wav = test::temp_dir("ple-audio") + "/tone.wav";
  {
    std::ofstream out(wav, std::ios::binary);
    auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
    const int n = 12000;  // 0.75 s: 19 audio tokens
    out.write("RIFF", 4), u32(36 + 2 * n), out.write("WAVE", 4);
    out.write("fmt ", 4), u32(16), u16(1), u16(1), u32(16000), u32(32000), u16(2), u16(16);
    out.write("data", 4), u32(2 * n);
    for (int i = 0; i < n; ++i) {
      const int16_t v = int16_t(8000 * std::sin(2 * M_PI * 440 * i / 16000.0) + 3000 * std::sin(0.37 * i));
      out.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  std::string want;
  for (const char* plan : {"reference", "split", "single", "unified"}) {
    const test::CommandResult r = test::run_splitdec("generate --model " + dir + " --prompt 'What is this?' --audio " + wav +
                                                     " --max-new-tokens 6 --plan " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const size_t at = r.output.find("tokens:");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string tokens = r.output.substr(at, r.output.find('\n', at) - at);
    if (want.empty()) want = tokens;
    EXPECT_EQ(tokens, want) << plan;
  }
}

// The per-layer table is read from the file as rows are needed: a file cut
// short under a loaded model is an error naming the tensor, not a crash.
TEST(Gemma4Lineup, ATableFileCutShortAfterLoadingIsAnError) {
  const std::string src = test::tiny_model_dir("tiny-gemma4-ple");
  const std::string dir = test::temp_dir("ple-cut");
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  const Model m = Model::load(dir);
  const ModelConfig& c = m.config();
  std::vector<float> row(size_t(c.num_layers) * size_t(c.per_layer_dim));
  m.weights().per_layer_table.row_f32(c.per_layer_vocab - 1, row.data());  // readable while whole
  fs::resize_file(fs::path(dir) / "model.safetensors", 4096);
  try {
    m.weights().per_layer_table.row_f32(c.per_layer_vocab - 1, row.data());
    FAIL() << "read a row past the end of the file";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("embed_tokens_per_layer"), std::string::npos) << e.what();
  }
}
