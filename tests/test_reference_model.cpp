// The reference forward pass: made models load back exactly, padding and
// fully masked rows, tensor-name variants, media splicing, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "generate/generator.h"
#include "generate/reference_source.h"
#include "tools/make_model.h"
#include "model/reference_forward.h"
#include "test_support.h"

using namespace splitdec;
namespace fs = std::filesystem;

namespace {

PromptBatch text_prompt(const std::vector<int>& tokens) {
  PromptBatch p;
  p.batch = 1;
  p.seq = int(tokens.size());
  p.tokens = tokens;
  p.modality.assign(tokens.size(), Modality::Text);
  p.attention_mask.assign(tokens.size(), 1);
  return p;
}

// BOS, 3 text, BOI, n image tokens, EOI, 3 text.
PromptBatch image_prompt(const ModelConfig& c, int n_image) {
  std::vector<int> t = {c.bos_token_id, 40, 41, 42, c.boi_token_id};
  for (int k = 0; k < n_image; ++k) t.push_back(c.image_token_id);
  t.insert(t.end(), {c.eoi_token_id, 43, 44, 45});
  PromptBatch p = text_prompt(t);
  for (size_t k = 0; k < t.size(); ++k)
    if (t[k] == c.image_token_id) p.modality[k] = Modality::Image;
  return p;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t k = 0; k < n; ++k) m = std::max(m, std::fabs(a[k] - b[k]));
  return m;
}

// Records every layer's attention output while delegating to the reference.
class RecordingAttention : public AttentionStage {
 public:
  RecordingAttention(const ModelConfig& c, const PromptBatch& p, MaskPolicy policy) : inner_(c, p, policy), c_(c), p_(p) {}
  void attend(int layer, const float* q, const float* k, const float* v, float* out) override {
    inner_.attend(layer, q, k, v, out);
    const size_t n = size_t(p_.rows()) * size_t(c_.num_heads) * size_t(c_.layers[size_t(layer)].head_dim);
    outputs.emplace_back(out, out + n);
  }
  std::vector<std::vector<float>> outputs;

 private:
  ReferenceAttention inner_;
  const ModelConfig& c_;
  const PromptBatch& p_;
};

}  // namespace

TEST(ReferenceModel, EmbeddingScaleIsRoundedToTheWeightDtype) {
  EXPECT_EQ(round_to_dtype(std::sqrt(5376.f), DType::BF16), 73.5f);
  EXPECT_NEAR(round_to_dtype(std::sqrt(5376.f), DType::F32), 73.32f, 0.01f);
}

TEST(ReferenceModel, MakeModelIsDeterministicAndLoadsBackExactly) {
  for (const char* dtype : {"f32", "bf16"}) {
    const std::string a = test::tiny_model_dir("tiny-gemma4", 5, dtype);
    MakeModelOptions o{"tiny-gemma4", test::temp_dir("again"), 5, std::string(dtype) == "bf16" ? DType::BF16 : DType::F32, {}};
    std::vector<std::pair<size_t, size_t>> heard;  // progress: each tensor, then done; changes no byte
    o.progress = [&](size_t done, size_t total) { heard.emplace_back(done, total); };
    make_model(o);
    ASSERT_GE(heard.size(), 2u);
    for (size_t k = 0; k < heard.size(); ++k) EXPECT_EQ(heard[k], std::make_pair(k, heard.size() - 1));
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "demo_image.npy"})
      EXPECT_EQ(test::read_file(a + "/" + f), test::read_file(o.out_dir + "/" + f)) << f << " differs for the same seed";
    // Every tensor converts to f32 and back to the same bytes.
    TensorStore store = TensorStore::open_dir(a);
    for (const auto& [name, t] : store.tensors()) {
      const std::vector<float> f = t.to_f32();
      for (size_t k = 0; k < f.size(); ++k) {
        ASSERT_TRUE(std::isfinite(f[k])) << name;
        if (t.dtype == DType::BF16) {
          uint16_t raw;
          std::memcpy(&raw, t.data + 2 * k, 2);
          ASSERT_EQ(f32_to_bf16(f[k]), raw) << name;
        } else {
          ASSERT_EQ(std::memcmp(&f[k], t.data + 4 * k, 4), 0) << name;
        }
      }
    }
    // The loaded model holds those exact values.
    const Model m = Model::load(a);
    const auto& embed = store.get("model.language_model.embed_tokens.weight").to_f32();
    const WeightMatrix& table = m.weights().embed_tokens;
    EXPECT_EQ(table.format, std::string(dtype) == "bf16" ? WeightFormat::BF16 : WeightFormat::F32);  // kept as stored
    std::vector<float> row(size_t(table.in));
    ASSERT_EQ(size_t(table.out) * row.size(), embed.size());
    for (int o = 0; o < table.out; ++o) {
      table.row_f32(o, row.data());
      for (size_t k = 0; k < row.size(); ++k) ASSERT_EQ(row[k], embed[size_t(o) * row.size() + k]);
    }
  }
  const std::string other = test::tiny_model_dir("tiny-gemma4", 6);
  EXPECT_NE(test::read_file(test::tiny_model_dir("tiny-gemma4", 5) + "/model.safetensors"),
            test::read_file(other + "/model.safetensors"));
}

TEST(ReferenceModel, F16CheckpointKeepsF16WeightsAndComputesLikeF32) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3", 5, "f16");
  const Model m = Model::load(dir);
  EXPECT_EQ(m.weights().embed_tokens.format, WeightFormat::F16);
  EXPECT_EQ(m.weights().layers[0].q_proj.format, WeightFormat::F16);
  EXPECT_EQ(m.weights().layers[0].down_proj.bytes(), size_t(m.weights().layers[0].down_proj.out) * size_t(m.weights().layers[0].down_proj.in) * 2);
  // The same values held as f32: every kernel path (matvec below kGemmRows
  // rows, GEMM panels above) gives the same logits.
  ModelWeights w32 = m.weights();
  auto widen = [](WeightMatrix& w) {
    if (w.empty()) return;
    std::vector<float> f(size_t(w.out) * size_t(w.in));
    for (int o = 0; o < w.out; ++o) w.row_f32(o, f.data() + size_t(o) * size_t(w.in));
    w = WeightMatrix::from_f32(WeightFormat::F32, w.out, w.in, f.data());
  };
  widen(w32.embed_tokens);
  widen(w32.lm_head);
  for (LayerWeights& L : w32.layers)
    for (WeightMatrix* x : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) widen(*x);
  const Model m32(m.config(), std::move(w32));
  for (int n : {3, 20}) {
    std::vector<int> tokens;
    for (int k = 0; k < n; ++k) tokens.push_back(2 + 7 * k % 300);
    const PromptBatch p = text_prompt(tokens);
    EXPECT_EQ(reference_logits(m, p, MaskPolicy::Causal), reference_logits(m32, p, MaskPolicy::Causal)) << n << " rows";
  }
}

TEST(ReferenceModel, LogitsAreFiniteAndInformative) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const Model& m = test::tiny_model(preset);
    const PromptBatch p = image_prompt(m.config(), 16);
    const std::vector<float> logits = reference_logits(m, p, m.config().default_policy);
    double sum = 0, sq = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v)) << preset;
      sum += v, sq += double(v) * v;
    }
    const double n = double(logits.size()), stdev = std::sqrt(sq / n - (sum / n) * (sum / n));
    EXPECT_GT(stdev, 0.3) << preset;
    EXPECT_LT(stdev, 30) << preset;
    // Not all positions pick the same argmax.
    const int V = m.config().vocab_size;
    std::vector<int> arg;
    for (int s = 0; s < p.seq; ++s) arg.push_back(int(std::max_element(&logits[size_t(s * V)], &logits[size_t((s + 1) * V)]) - &logits[size_t(s * V)]));
    std::sort(arg.begin(), arg.end());
    EXPECT_GT(std::unique(arg.begin(), arg.end()) - arg.begin(), 3) << preset;
  }
}

TEST(ReferenceModel, FullyMaskedRowGivesZeros) {
  const Model& m = test::tiny_model("tiny-gemma4");
  PromptBatch p = text_prompt({0, 0, 2, 50, 51, 52});
  p.attention_mask = {0, 0, 1, 1, 1, 1};
  validate_prompt_batch(p, m.config());
  std::vector<float> hidden = embed_prompt(m, p);
  const auto pos = p.rope_positions();
  RecordingAttention rec(m.config(), p, MaskPolicy::Gemma4);
  m.run_layers(hidden.data(), int(p.rows()), pos.data(), rec);
  ASSERT_EQ(rec.outputs.size(), size_t(m.config().num_layers));
  for (int l = 0; l < m.config().num_layers; ++l) {
    const int width = m.config().num_heads * m.config().layers[size_t(l)].head_dim;
    for (int row = 0; row < 2; ++row)
      for (int k = 0; k < width; ++k) ASSERT_EQ(rec.outputs[size_t(l)][size_t(row * width + k)], 0.f) << "layer " << l;
    float any = 0;
    for (int k = 0; k < width; ++k) any += std::fabs(rec.outputs[size_t(l)][size_t(2 * width + k)]);
    EXPECT_GT(any, 0.f);
  }
  for (float v : reference_logits(m, p, MaskPolicy::Gemma4)) ASSERT_TRUE(std::isfinite(v));
}

TEST(ReferenceModel, LeftPaddedBatchMatchesUnbatched) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const Model& m = test::tiny_model(preset);
    const ModelConfig& c = m.config();
    const PromptBatch long_p = image_prompt(c, 16);
    const PromptBatch short_p = image_prompt(c, 4);
    const int pad = long_p.seq - short_p.seq;
    PromptBatch batch;
    batch.batch = 2;
    batch.seq = long_p.seq;
    batch.tokens = long_p.tokens;
    batch.modality = long_p.modality;
    batch.attention_mask = long_p.attention_mask;
    for (int k = 0; k < pad; ++k) {
      batch.tokens.push_back(c.pad_token_id);
      batch.modality.push_back(Modality::Text);
      batch.attention_mask.push_back(0);
    }
    batch.tokens.insert(batch.tokens.end(), short_p.tokens.begin(), short_p.tokens.end());
    batch.modality.insert(batch.modality.end(), short_p.modality.begin(), short_p.modality.end());
    batch.attention_mask.insert(batch.attention_mask.end(), short_p.attention_mask.begin(), short_p.attention_mask.end());
    const int V = c.vocab_size;
    const auto both = reference_logits(m, batch, c.default_policy);
    const auto a = reference_logits(m, long_p, c.default_policy);
    const auto b = reference_logits(m, short_p, c.default_policy);
    EXPECT_LT(max_abs_diff(both.data(), a.data(), a.size()), 1e-4) << preset;
    EXPECT_LT(max_abs_diff(both.data() + size_t((batch.seq + pad) * V), b.data(), b.size()), 1e-4) << preset;
  }
}

TEST(ReferenceModel, BidirectionalBlockChangesOnlyRowsThatCanSeeAhead) {
  const Model& m = test::tiny_model("tiny-gemma3");
  const ModelConfig& c = m.config();
  const PromptBatch p = image_prompt(c, 16);
  const int V = c.vocab_size;
  const auto causal = reference_logits(m, p, MaskPolicy::Causal);
  const auto bidir = reference_logits(m, p, MaskPolicy::Gemma3);
  // Rows before the image are identical; image rows differ.
  for (int s = 0; s < 5; ++s)
    EXPECT_EQ(max_abs_diff(&causal[size_t(s * V)], &bidir[size_t(s * V)], size_t(V)), 0.f) << s;
  EXPECT_GT(max_abs_diff(&causal[size_t(6 * V)], &bidir[size_t(6 * V)], size_t(V)), 1e-3);
}

TEST(ReferenceModel, MediaRowsAreSplicedAtNonTextPositions) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const ModelConfig& c = m.config();
  PromptBatch p = image_prompt(c, 4);
  p.media.assign(size_t(4 * c.hidden_size), 0.5f);
  const auto emb = embed_prompt(m, p);
  EXPECT_EQ(emb[size_t(5 * c.hidden_size)], 0.5f);  // first image position, unscaled
  const auto with_media = reference_logits(m, p, c.default_policy);
  PromptBatch q = p;
  q.media[0] = -3.f;
  const auto changed = reference_logits(m, q, c.default_policy);
  const int V = c.vocab_size;
  EXPECT_EQ(max_abs_diff(&with_media[0], &changed[0], size_t(5 * V)), 0.f);  // before the image
  EXPECT_GT(max_abs_diff(&with_media[size_t((p.seq - 1) * V)], &changed[size_t((p.seq - 1) * V)], size_t(V)), 0.f);
  // Wrong counts are errors.
  q.media.resize(size_t(3 * c.hidden_size));
  EXPECT_THROW(reference_logits(m, q, c.default_policy), InputError);
  q.media.resize(size_t(3 * c.hidden_size + 1));
  EXPECT_THROW(reference_logits(m, q, c.default_policy), InputError);
}

TEST(ReferenceModel, AcceptsEveryTensorNamePrefix) {
  const std::string src = test::tiny_model_dir("tiny-gemma3");
  const Model& base = test::tiny_model("tiny-gemma3");
  const PromptBatch p = image_prompt(base.config(), 4);
  const auto want = reference_logits(base, p, MaskPolicy::Gemma3);
  for (const std::string prefix : {"language_model.model.", "model."}) {
    const std::string dir = test::temp_dir("prefix");
    fs::copy_file(src + "/config.json", dir + "/config.json");
    TensorStore store = TensorStore::open_dir(src);
    std::vector<TensorToWrite> out;
    for (const auto& [name, t] : store.tensors())
      out.push_back({prefix + name.substr(std::string("model.language_model.").size()), t.dtype, t.shape,
                     std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    write_safetensors(dir + "/model.safetensors", out);
    const Model m = Model::load(dir);
    EXPECT_EQ(reference_logits(m, p, MaskPolicy::Gemma3), want) << prefix;
  }
}

TEST(ReferenceModel, MissingOrMisshapedTensorsAreNamed) {
  const std::string src = test::tiny_model_dir("tiny-gemma4");
  TensorStore store = TensorStore::open_dir(src);
  auto rewrite = [&](const std::string& drop, const std::string& reshape) {
    const std::string dir = test::temp_dir("broken");
    fs::copy_file(src + "/config.json", dir + "/config.json");
    std::vector<TensorToWrite> out;
    for (const auto& [name, t] : store.tensors()) {
      if (name == drop) continue;
      TensorToWrite w{name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
      if (name == reshape) w.shape = {w.shape[0] * w.shape[1]};
      out.push_back(std::move(w));
    }
    write_safetensors(dir + "/model.safetensors", out);
    try {
      Model::load(dir);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string msg = rewrite("model.language_model.layers.1.self_attn.k_proj.weight", "");
  EXPECT_NE(msg.find("layers.1.self_attn.k_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  msg = rewrite("", "model.language_model.layers.2.mlp.up_proj.weight");
  EXPECT_NE(msg.find("layers.2.mlp.up_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected [128, 64]"), std::string::npos) << msg;
}

TEST(ReferenceModel, GreedyIsDeterministicForASeed) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const Model a = Model::load(test::tiny_model_dir(preset, 11));
    MakeModelOptions o{preset, test::temp_dir("det"), 11, DType::F32, {}};
    make_model(o);
    const Model b = Model::load(o.out_dir);
    const PromptBatch p = image_prompt(a.config(), 16);
    const GenerationResult ra = reference_generate(a, {{p, 6}}, a.config().default_policy);
    const GenerationResult rb = reference_generate(b, {{p, 6}}, b.config().default_policy);
    EXPECT_EQ(ra.tokens, rb.tokens);
    EXPECT_EQ(ra.step_logits, rb.step_logits);
    EXPECT_EQ(ra.step_logits.size(), size_t(ra.steps) * size_t(a.config().vocab_size));
    // Row 0 of the step logits is the last prompt position.
    const auto prompt_logits = reference_logits(a, p, a.config().default_policy);
    const int V = a.config().vocab_size;
    EXPECT_EQ(std::vector<float>(prompt_logits.end() - V, prompt_logits.end()),
              std::vector<float>(ra.step_logits.begin(), ra.step_logits.begin() + V));
  }
}
