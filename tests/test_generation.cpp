// Tokenizer, prompt templates, media files, sampling, stop strings and
// streaming.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "core/error.h"
#include "core/npy.h"
#include "generate/generator.h"
#include "prompt/prompt_text.h"
#include "generate/sampler.h"
#include "generate/token_logprobs.h"
#include "io/media_embeddings.h"
#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "test_support.h"

using namespace splitdec;

namespace {
const Tokenizer& tiny_tokenizer() {
  static auto t = Tokenizer::open_dir(test::tiny_model_dir("tiny-gemma4"));
  return *t;
}
}  // namespace

TEST(Tokenizer, RoundTripsAndSpecialPieces) {
  const Tokenizer& t = tiny_tokenizer();
  for (const std::string s : {"The cat sits on a red chair.", "hello   world", "Zürich ünïcödé ✓ 123", ""})
    EXPECT_EQ(t.decode(t.encode(s)), s);
  for (const std::string& piece : gemma4_special_pieces()) {
    const int id = t.piece_id(piece);
    ASSERT_GE(id, 0) << piece;
    EXPECT_EQ(t.encode(piece), std::vector<int>{id}) << piece;  // one token, never split
    EXPECT_EQ(t.piece(id), piece);
  }
  EXPECT_EQ(t.piece_id("<no_such_token>"), -1);
  EXPECT_EQ(t.decode({t.piece_count() + 5}), "<id:" + std::to_string(t.piece_count() + 5) + ">");
  EXPECT_THROW(t.piece(-1), InputError);
  EXPECT_THROW(SpecialTokens::require(-1, "<start_of_turn>"), InputError);
}

TEST(PromptText, MediaExpansion) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const ModelConfig& c = m.config();
  const Tokenizer& tok = tiny_tokenizer();
  const std::string dir = test::temp_dir("media");
  std::vector<float> rows(size_t(3 * c.hidden_size), 0.5f);
  write_npy(dir + "/img.npy", {3, c.hidden_size}, rows.data());
  const PromptBatch p = prompt_from_text("look <image:" + dir + "/img.npy> now", tok, c);
  const SpecialTokens sp = SpecialTokens::resolve(c, tok);
  EXPECT_EQ(p.tokens[0], c.bos_token_id);
  EXPECT_EQ(sp.start_of_turn, tok.piece_id("<|turn>"));  // Gemma-4's name for it
  const auto boi = std::find(p.tokens.begin(), p.tokens.end(), sp.boi) - p.tokens.begin();
  ASSERT_LT(boi + 4, p.seq);
  for (int k = 1; k <= 3; ++k) {
    EXPECT_EQ(p.tokens[size_t(boi + k)], c.image_token_id);
    EXPECT_EQ(p.modality[size_t(boi + k)], Modality::Image);
  }
  EXPECT_EQ(p.tokens[size_t(boi + 4)], sp.eoi);
  EXPECT_EQ(p.media.size(), rows.size());
  EXPECT_EQ(tok.decode(std::vector<int>(p.tokens.begin() + boi + 5, p.tokens.end())), " now");
  // Audio placeholders use the audio markers.
  const PromptBatch a = prompt_from_text("hear <audio:" + dir + "/img.npy>", tok, c);
  EXPECT_EQ(std::count(a.modality.begin(), a.modality.end(), Modality::Audio), 3);
  EXPECT_NE(std::find(a.tokens.begin(), a.tokens.end(), sp.boa), a.tokens.end());
  // A literal soft token in text is refused.
  EXPECT_THROW(prompt_from_text("<|image|>", tok, c), InputError);
}

TEST(MediaFiles, ShapesDtypesAndCorruption) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  const std::string dir = test::temp_dir("media-errors");
  auto error_of = [&](const std::string& path) {
    try {
      load_media_embeddings(path, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::vector<float> ok(size_t(2 * c.hidden_size), 1.f);
  write_npy(dir + "/ok.npy", {2, c.hidden_size}, ok.data());
  EXPECT_EQ(load_media_embeddings(dir + "/ok.npy", c).rows, 2);
  write_npy(dir + "/batched.npy", {1, 2, c.hidden_size}, ok.data());
  EXPECT_EQ(load_media_embeddings(dir + "/batched.npy", c).rows, 2);
  write_npy(dir + "/wide.npy", {1, 2 * c.hidden_size}, ok.data());
  EXPECT_NE(error_of(dir + "/wide.npy").find("expected [n, hidden_size=64]"), std::string::npos);
  std::string f64 = test::read_file(dir + "/ok.npy");
  f64.replace(f64.find("<f4"), 3, "<f8");
  test::write_file(dir + "/f64.npy", f64);
  EXPECT_NE(error_of(dir + "/f64.npy").find("'<f8'"), std::string::npos);
  const std::string whole = test::read_file(dir + "/ok.npy");
  test::write_file(dir + "/short.npy", whole.substr(0, whole.size() - 7));
  EXPECT_NE(error_of(dir + "/short.npy").find("bytes"), std::string::npos);
  std::vector<float> nan = ok;
  nan[5] = NAN;
  write_npy(dir + "/nan.npy", {2, c.hidden_size}, nan.data());
  EXPECT_NE(error_of(dir + "/nan.npy").find("non-finite"), std::string::npos);
  EXPECT_NE(error_of(dir + "/missing.npy").find("missing.npy"), std::string::npos);
  // A negative dimension is not read as a positive one.
  std::string negative = test::read_file(dir + "/ok.npy");
  negative.replace(negative.find("(2,"), 3, "(-2,");
  test::write_file(dir + "/negative.npy", negative);
  EXPECT_NE(error_of(dir + "/negative.npy").find("not a tuple"), std::string::npos) << error_of(dir + "/negative.npy");
  // safetensors: bf16 is accepted; two unnamed tensors are ambiguous.
  std::vector<uint8_t> bf(size_t(2 * c.hidden_size) * 2, 0);
  write_safetensors(dir + "/one.safetensors", {{"x", DType::BF16, {2, c.hidden_size}, bf}});
  EXPECT_EQ(load_media_embeddings(dir + "/one.safetensors", c).rows, 2);
  write_safetensors(dir + "/two.safetensors", {{"x", DType::BF16, {2, c.hidden_size}, bf}, {"y", DType::BF16, {2, c.hidden_size}, bf}});
  EXPECT_NE(error_of(dir + "/two.safetensors").find("2 tensors"), std::string::npos);
  write_safetensors(dir + "/named.safetensors", {{"embeddings", DType::BF16, {2, c.hidden_size}, bf}, {"y", DType::BF16, {1}, {0, 0}}});
  EXPECT_EQ(load_media_embeddings(dir + "/named.safetensors", c).rows, 2);
}

TEST(Sampling, GreedyByDefaultAndDeterministicUnderASeed) {
  std::vector<float> logits = {0.1f, 2.f, 1.9f, -1.f};
  Sampler greedy(SamplingOptions{});
  auto copy = logits;
  EXPECT_EQ(greedy.choose(copy, {}), 1);
  SamplingOptions o;
  o.sample = true;
  o.temperature = 1.5f;
  o.seed = 42;
  auto draws = [&](uint64_t seed) {
    o.seed = seed;
    Sampler s(o);
    std::vector<int> out;
    for (int k = 0; k < 50; ++k) {
      auto l = logits;
      out.push_back(s.choose(l, {}));
    }
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
  o.temperature = -1;
  EXPECT_THROW(o.validate(), InputError);
}

// greedy_choice against std::max_element: every length around its lane
// count, ties (the first wins), -inf (banned) logits, the maximum anywhere.
TEST(Sampling, GreedyChoiceIsMaxElement) {
  std::mt19937 rng(5);
  for (size_t n = 0; n < 40; ++n)
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = float(int(rng() % 7)) - 3.f;  // few values: many ties
      if (n > 0 && trial % 3 == 0) l[rng() % n] = -std::numeric_limits<float>::infinity();
      if (n > 0 && trial % 5 == 0) l[rng() % n] = 9.f;
      if (trial == 1) std::fill(l.begin(), l.end(), -std::numeric_limits<float>::infinity());
      const int want = n == 0 ? 0 : int(std::max_element(l.begin(), l.end()) - l.begin());
      ASSERT_EQ(greedy_choice(l), want) << "n " << n << " trial " << trial;
    }
  std::vector<float> big(262144);
  for (float& x : big) x = float(rng() % 1000);
  big[262143] = 2000.f;
  EXPECT_EQ(greedy_choice(big), 262143);
}

TEST(Sampling, TopKTopPMinPDistributions) {
  const std::vector<float> logits = {3.f, 2.5f, 2.f, 1.f, 0.f, -1.f};
  auto softmax_over = [&](std::vector<int> keep) {
    std::vector<double> p(logits.size(), 0.0);
    double z = 0;
    for (int k : keep) z += std::exp(double(logits[size_t(k)]));
    for (int k : keep) p[size_t(k)] = std::exp(double(logits[size_t(k)])) / z;
    return p;
  };
  auto empirical = [&](const SamplingOptions& o, int n) {
    Sampler s(o);
    std::vector<double> f(logits.size(), 0.0);
    for (int k = 0; k < n; ++k) {
      auto l = logits;
      f[size_t(s.choose(l, {}))] += 1.0 / n;
    }
    return f;
  };
  SamplingOptions o;
  o.sample = true;
  o.temperature = 1.f;
  o.seed = 7;
  o.top_k = 3;
  const auto want_k = softmax_over({0, 1, 2});
  const auto got_k = empirical(o, 20000);
  for (size_t t = 0; t < logits.size(); ++t) EXPECT_NEAR(got_k[t], want_k[t], 0.015) << "top-k token " << t;
  EXPECT_EQ(got_k[3] + got_k[4] + got_k[5], 0.0);
  // top-p 0.6: p = [.39, .24, .14, ...] -> the first two reach 0.63 >= 0.6.
  o.top_k = 0;
  o.top_p = 0.6f;
  const auto want_p = softmax_over({0, 1});
  const auto got_p = empirical(o, 20000);
  for (size_t t = 0; t < logits.size(); ++t) EXPECT_NEAR(got_p[t], want_p[t], 0.015) << "top-p token " << t;
  const auto dist_p = sampling_distribution(logits, o);
  for (size_t t = 0; t < logits.size(); ++t) EXPECT_NEAR(dist_p[t], want_p[t], 1e-12);
  // min-p 0.5 keeps tokens with p >= 0.5 * p_max: exp(-0.5) = .61 and exp(-1) = .37 -> tokens 0 and 1.
  o.top_p = 1.f;
  o.min_p = 0.5f;
  const auto dist = sampling_distribution(logits, o);
  EXPECT_GT(dist[1], 0.0);
  EXPECT_EQ(dist[2], 0.0);
  // Temperature sharpens.
  o.min_p = 0;
  o.temperature = 0.5f;
  EXPECT_GT(sampling_distribution(logits, o)[0], softmax_over({0, 1, 2, 3, 4, 5})[0]);
}

TEST(Sampling, RepetitionPenaltyFollowsHf) {
  std::vector<float> l = {2.f, -2.f, 1.f};
  apply_repetition_penalty(l, {0, 1, 0}, 2.f);
  EXPECT_EQ(l, (std::vector<float>{1.f, -4.f, 1.f}));
}

// OpenAI's logit_bias: added to the logits first; -100 is a ban that no
// logit overcomes, greedy or sampled.
TEST(Sampling, LogitBiasAddsAndBans) {
  const std::vector<float> logits = {0.1f, 2.f, 1.9f, -1.f};
  auto greedy = [&](std::map<int, float> bias) {
    SamplingOptions o;
    o.logit_bias = std::move(bias);
    Sampler s(o);
    auto l = logits;
    return s.choose(l, {});
  };
  EXPECT_EQ(greedy({}), 1);
  EXPECT_EQ(greedy({{1, -100.f}}), 2);
  EXPECT_EQ(greedy({{1, -0.05f}}), 1);
  EXPECT_EQ(greedy({{1, -0.2f}}), 2);
  EXPECT_EQ(greedy({{3, 5.f}}), 3);
  EXPECT_EQ(greedy({{0, -100.f}, {1, -100.f}, {2, -100.f}}), 3);  // a logit of -1 still beats banned ones
  std::vector<float> l = {1e30f, 0.f};
  apply_logit_bias(l, {{0, -100.f}, {1, 2.5f}});
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);
  EXPECT_EQ(l[1], 2.5f);
  // Sampled: a banned token is never drawn.
  SamplingOptions o;
  o.sample = true;
  o.temperature = 2.f;
  o.seed = 3;
  o.logit_bias = {{1, -100.f}, {2, -100.f}};
  Sampler s(o);
  for (int k = 0; k < 2000; ++k) {
    auto x = logits;
    const int t = s.choose(x, {});
    ASSERT_TRUE(t == 0 || t == 3) << t;
  }
  // Ranges: checked by validate (values) and check_vocabulary (ids, everything banned).
  o.logit_bias = {{1, 100.5f}};
  EXPECT_THROW(o.validate(), InputError);
  o.logit_bias = {{-1, 1.f}};
  EXPECT_THROW(o.validate(), InputError);
  o.logit_bias = {{4, 1.f}};
  EXPECT_NO_THROW(o.validate());
  EXPECT_THROW(o.check_vocabulary(4), InputError);
  EXPECT_NO_THROW(o.check_vocabulary(5));
  o.logit_bias = {{0, -100.f}, {1, -100.f}, {2, -100.f}, {3, -100.f}};
  EXPECT_THROW(o.check_vocabulary(4), InputError);
  EXPECT_NO_THROW(o.check_vocabulary(5));
}

// OpenAI's definition: logit[t] -= presence * (count[t] > 0) + frequency * count[t],
// counted over the tokens generated so far; 0 changes nothing.
TEST(Sampling, PresenceAndFrequencyPenaltiesFollowOpenAi) {
  std::vector<float> l = {1.f, 1.f, 1.f, 1.f};
  apply_presence_frequency_penalties(l, {0, 0, 2}, 0.5f, 0.25f);
  EXPECT_EQ(l, (std::vector<float>{0.f, 1.f, 0.25f, 1.f}));
  l = {1.f, 1.f, 1.f, 1.f};
  apply_presence_frequency_penalties(l, {0, 0, 2}, -1.f, -2.f);  // negative values encourage repeats
  EXPECT_EQ(l, (std::vector<float>{6.f, 1.f, 4.f, 1.f}));
  l = {1.f, -3.f, 2.f};
  apply_presence_frequency_penalties(l, {0, 1, 2, 2}, 0.f, 0.f);
  EXPECT_EQ(l, (std::vector<float>{1.f, -3.f, 2.f}));
  // Through the sampler: the generated tokens are penalised, the history (prompt) is not.
  SamplingOptions o;
  o.frequency_penalty = 1.f;
  Sampler s(o);
  std::vector<float> x = {2.f, 1.5f, 0.f};
  EXPECT_EQ(s.choose(x, {0, 0, 0}, {}), 0);
  x = {2.f, 1.5f, 0.f};
  EXPECT_EQ(s.choose(x, {0}, {0}), 1);
  for (float bad : {2.5f, -2.01f}) {
    o.frequency_penalty = bad;
    EXPECT_THROW(o.validate(), InputError);
    o.frequency_penalty = 0;
    o.presence_penalty = bad;
    EXPECT_THROW(o.validate(), InputError);
    o.presence_penalty = 0;
  }
}

namespace {
// Emits a fixed token script as the argmax, whatever the prompt.
class ScriptedSource : public LogitsSource {
 public:
  ScriptedSource(std::vector<int> script, int vocab) : script_(std::move(script)), vocab_(vocab) {}
  std::vector<float> prompt(const std::vector<int>&, const PromptBatch& p, bool all) override {
    std::vector<float> l(size_t(all ? p.seq : 1) * size_t(vocab_), 0.f);
    l[l.size() - size_t(vocab_) + size_t(script_[next_ % script_.size()])] = 10.f;
    ++next_;
    return l;
  }
  std::vector<float> step(const std::vector<int>&, const std::vector<int>&) override {
    std::vector<float> l(size_t(vocab_), 0.f);
    l[size_t(script_[next_ % script_.size()])] = 10.f;
    ++next_;
    return l;
  }

 private:
  std::vector<int> script_;
  int vocab_;
  size_t next_ = 0;
};
}  // namespace

TEST(StopStrings, SpanTokenBoundariesAndNeverStream) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  const Tokenizer& tok = tiny_tokenizer();
  const std::vector<int> script = tok.encode("the cat sat on the mat near the house");
  ASSERT_GT(script.size(), 6u);
  // "t on th" spans several pieces whatever the segmentation.
  GenerationOptions o;
  o.tokenizer = &tok;
  o.stop_strings = {"t on th"};
  std::string streamed;
  o.on_text = [&](int, const std::string& t) { streamed += t; };
  ScriptedSource src(script, c.vocab_size);
  Generator g(src, c, o);
  PromptBatch p;
  p.batch = 1, p.seq = 1, p.tokens = {2}, p.modality = {Modality::Text}, p.attention_mask = {1};
  const auto texts = g.run_turn({p, 40});
  EXPECT_EQ(texts[0], "the cat sa");
  EXPECT_EQ(streamed, "the cat sa");
  EXPECT_EQ(g.result().stop_reasons[0], StopReason::StopString);
  EXPECT_LT(g.result().tokens[0].size(), script.size());
  // Without the stop string the whole script (then more) is produced.
  GenerationOptions plain;
  plain.tokenizer = &tok;
  std::string all;
  plain.on_text = [&](int, const std::string& t) { all += t; };
  ScriptedSource src2(script, c.vocab_size);
  Generator g2(src2, c, plain);
  g2.run_turn({p, int(script.size())});
  EXPECT_EQ(all, "the cat sat on the mat near the house");
  EXPECT_EQ(g2.result().stop_reasons[0], StopReason::MaxTokens);
}

TEST(StopTokens, EndTheTurnAndAreReported) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  const Tokenizer& tok = tiny_tokenizer();
  std::vector<int> script = tok.encode("the cat");
  script.push_back(c.eos_token_ids[0]);
  ScriptedSource src(script, c.vocab_size);
  GenerationOptions o;
  o.tokenizer = &tok;
  Generator g(src, c, o);
  PromptBatch p;
  p.batch = 1, p.seq = 1, p.tokens = {2}, p.modality = {Modality::Text}, p.attention_mask = {1};
  EXPECT_EQ(g.run_turn({p, 40})[0], "the cat");
  EXPECT_EQ(g.result().stop_reasons[0], StopReason::StopToken);
  EXPECT_EQ(g.result().tokens[0].back(), c.eos_token_ids[0]);
}

TEST(NonFiniteLogits, StopTheRequestWithAnErrorNeverAToken) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  // Logits that turn NaN at the third call.
  class PoisonedSource : public LogitsSource {
   public:
    explicit PoisonedSource(int vocab) : vocab_(vocab) {}
    std::vector<float> prompt(const std::vector<int>&, const PromptBatch&, bool) override { return row(); }
    std::vector<float> step(const std::vector<int>&, const std::vector<int>&) override { return row(); }

   private:
    std::vector<float> row() {
      std::vector<float> l(size_t(vocab_), 0.f);
      l[50] = 1.f;
      if (++calls_ >= 3) l[7] = std::nanf("");
      return l;
    }
    int vocab_, calls_ = 0;
  } src(c.vocab_size);
  Generator g(src, c, {});
  PromptBatch p;
  p.batch = 1, p.seq = 1, p.tokens = {2}, p.modality = {Modality::Text}, p.attention_mask = {1};
  try {
    g.run_turn({p, 10});
    FAIL() << "NaN logits gave tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
}

// token_logprob against a plain log-softmax in double: the temperature
// divides the logits, banned (-inf) tokens are never alternatives, ties go
// to the lower id.
TEST(TokenLogprobs, AreTheLogSoftmaxOfTheTemperedLogits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int round = 0; round < 50; ++round) {
    const int V = 1 + int(rng() % 300);
    std::vector<float> logits(static_cast<size_t>(V));
    for (float& x : logits) x = normal(rng);
    if (V > 3) logits[1] = logits[2];  // a tie
    if (V > 4) logits[size_t(V - 1)] = -INFINITY;
    const float t = round % 3 == 0 ? 0.f : 0.25f + float(round % 5) * 0.4f;
    const int token = int(rng() % uint32_t(V)), top = int(rng() % 25);
    const TokenLogprob got = token_logprob(logits, t, token, top);
    const double temp = t > 0 ? t : 1.0;
    double mx = -INFINITY, sum = 0;
    for (float x : logits) mx = std::max(mx, double(x) / temp);
    for (float x : logits) sum += std::exp(double(x) / temp - mx);
    auto want = [&](int id) { return double(logits[size_t(id)]) / temp - mx - std::log(sum); };
    EXPECT_EQ(got.token, token);
    if (std::isfinite(logits[size_t(token)])) {
      EXPECT_NEAR(got.logprob, want(token), 1e-5);
    }
    std::vector<int> ids;
    for (int i = 0; i < V; ++i)
      if (std::isfinite(logits[size_t(i)])) ids.push_back(i);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
    ids.resize(std::min(ids.size(), size_t(top)));
    ASSERT_EQ(got.top.size(), ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      EXPECT_EQ(got.top[j].first, ids[j]);
      EXPECT_NEAR(got.top[j].second, want(ids[j]), 1e-5);
    }
  }
}
