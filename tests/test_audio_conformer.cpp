// Gemma-4 E2B/E4B's conformer audio frontend (audio_log_mel.h,
// conformer_audio_tower.h, its wiring in frontend_config / frontend_weights
// / media_frontend) against the float64 oracle (reference_towers.h), which
// follows Hugging Face's code literally: the clip padded to a multiple of
// 128 samples, every frame of the padded clip with its validity mask, a plain
// DFT, the masked subsampling convs, the blocked attention with _rel_shift
// and the 5-D mask, the padded rows dropped at the end. The fast path runs
// the valid frames alone, with the attention written per query; agreement
// here is what shows the two are the same computation.
//
// Also: the soft-token count against the processor's two formulas, the
// checkpoint written in HF's layout (config.json's audio_config as
// transformers writes it, safetensors under HF's module paths, written from
// a list kept here, not from frontend_tensors), errors, and a tiny gemma4
// model with vision + audio through the engine.
//
// Tolerance: features within 1e-4 absolute (log-mel values of a few units;
// the FFT is float64 on both sides, f32 rounding of the window product and
// of the output dominates). Tower: relative RMS below 1e-4 and the worst
// element within 5e-4 of the output's RMS (f32 against float64 through 2
// layers of norms and a softmax; the printed lines show the margin).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <functional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/gemm_bf16.h"
#include "media/audio_log_mel.h"
#include "media/conformer_audio_tower.h"
#include "media/frontend_config.h"
#include "media/frontend_weights.h"
#include "media/media_frontend.h"
#include "media/reference_towers.h"
#include "serve_test_support.h"
#include "splitdec/batch.h"
#include "splitdec/splitdec.h"
#include "test_rng.h"
#include "test_support.h"

using namespace splitdec;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kFeatureAbs = 1e-4;
constexpr double kRelRms = 1e-4;
constexpr double kMaxRel = 5e-4;

using test::Rng;

AudioClip random_clip(size_t n, uint32_t seed) {
  Rng rng(seed);
  AudioClip c;
  c.samples.resize(n);
  // Speech-like level: a tone plus noise, peak well below 1.
  for (size_t i = 0; i < n; ++i) c.samples[i] = 0.3f * float(std::sin(0.031 * double(i))) + rng.uniform(-0.2f, 0.2f);
  return c;
}

struct ThreadsGuard {
  ~ThreadsGuard() { ThreadPool::set_threads(0); }
};
struct ExactGemmGuard {
  bool saved = exact_gemm();
  ~ExactGemmGuard() { set_exact_gemm(saved); }
};

double rms(const std::vector<float>& v) {
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  return std::sqrt(ss / double(std::max<size_t>(1, v.size())));
}

// The tower's rows against the reference: 1 and 2 threads bit-identical,
// relative RMS and worst element within the budget above.
void expect_close(const std::string& label, const MediaEmbeddings& one, const MediaEmbeddings& two,
                  const MediaEmbeddings& want) {
  ASSERT_EQ(one.rows, want.rows) << label;
  ASSERT_EQ(one.data.size(), want.data.size()) << label;
  EXPECT_EQ(one.data, two.data) << label << ": 1 and 2 threads differ";
  const double scale = rms(want.data);
  ASSERT_GT(scale, 1e-3) << label << ": a degenerate output proves nothing";
  double worst = 0, num = 0, den = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    ASSERT_TRUE(std::isfinite(one.data[i])) << label << " element " << i;
    const double d = double(one.data[i]) - want.data[i];
    worst = std::max(worst, std::abs(d));
    num += d * d, den += double(want.data[i]) * want.data[i];
  }
  const double err = std::sqrt(num / den);
  std::printf("  %-50s rows %4lld  rel RMS %.2e  max |err| / RMS %.2e\n", label.c_str(), (long long)want.rows, err,
              worst / scale);
  EXPECT_LT(err, kRelRms) << label;
  EXPECT_LT(worst / scale, kMaxRel) << label;
}

template <class E, class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// ---- features ------------------------------------------------------------------

TEST(AudioLogMel, FrameCountIsHfsMask) {
  // A frame is valid when the sample just past its 20 ms window is real audio.
  EXPECT_EQ(log_mel_frames(0), 0);
  EXPECT_EQ(log_mel_frames(160), 0);
  EXPECT_EQ(log_mel_frames(161), 1);
  EXPECT_EQ(log_mel_frames(320), 1);
  EXPECT_EQ(log_mel_frames(321), 2);
  EXPECT_EQ(log_mel_frames(16000), 99);
  EXPECT_EQ(log_mel_frames(480000), 2999);
}

TEST(AudioLogMel, MatchesReferenceOnEdgeLengths) {
  for (size_t n : {size_t(100), size_t(160), size_t(161), size_t(320), size_t(321), size_t(481), size_t(1000), size_t(1601),
                   size_t(16000 + 37)}) {
    const AudioClip clip = random_clip(n, uint32_t(n));
    const std::vector<float> fast = log_mel_features(clip.samples);
    const MediaEmbeddings want = reference_log_mel(clip.samples);
    ASSERT_EQ(want.rows, log_mel_frames(int64_t(n))) << n << " samples: the reference's mask disagrees";
    ASSERT_EQ(fast.size(), want.data.size()) << n;
    double worst = 0;
    for (size_t i = 0; i < fast.size(); ++i) worst = std::max(worst, std::abs(double(fast[i]) - want.data[i]));
    EXPECT_LT(worst, kFeatureAbs) << n << " samples";
  }
}

TEST(AudioLogMel, FilterBankAndSilence) {
  // HTK triangles over 0..8000 Hz on 257 bins of 31.25 Hz: none negative;
  // the lowest ones (about 14 Hz apart) fall between bins and are all zero,
  // as in HF (which silences the warning); the rest cover bins.
  const LogMelShape s;
  const std::vector<double> f = htk_mel_filters(s);
  ASSERT_EQ(f.size(), size_t(257) * 128);
  int empty = 0;
  for (int j = 0; j < 128; ++j) {
    double sum = 0;
    for (int k = 0; k < 257; ++k) {
      sum += f[size_t(k) * 128 + j];
      EXPECT_GE(f[size_t(k) * 128 + j], 0.0);
    }
    if (sum == 0.0) {
      ++empty;
      EXPECT_LT(j, 16) << "filter " << j << " is empty";
    }
  }
  EXPECT_LT(empty, 16);
  // Silence: log(0 + 0.001) everywhere.
  const std::vector<float> quiet = log_mel_features(std::vector<float>(1600, 0.f));
  for (float v : quiet) EXPECT_FLOAT_EQ(v, float(std::log(1e-3)));
  // A 1 kHz tone peaks in the filter whose centre is nearest 1 kHz.
  std::vector<float> tone(3200);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = float(0.5 * std::sin(2 * 3.14159265358979 * 1000.0 * double(i) / 16000.0));
  const std::vector<float> feats = log_mel_features(tone);
  const float* row = feats.data() + size_t(10) * 128;
  const int peak = int(std::max_element(row, row + 128) - row);
  const double mel1k = 2595.0 * std::log10(1.0 + 1000.0 / 700.0), top = 2595.0 * std::log10(1.0 + 8000.0 / 700.0);
  EXPECT_NEAR(peak, mel1k / (top / 129.0) - 1, 1.5);
}

// ---- token count ---------------------------------------------------------------

// processing_gemma4.py's replace_audio_token: the feature mask of the
// padded clip, subsampled twice by mask[::2][:t_out], summed.
int64_t processor_mask_tokens(int64_t n) {
  const int64_t padded = (n + 127) / 128 * 128 + 160;
  const int64_t frames = std::max<int64_t>(0, (padded - 321) / 160 + 1);
  std::vector<bool> mask(static_cast<size_t>(frames));
  for (int64_t i = 0; i < frames; ++i) mask[size_t(i)] = i * 160 + 320 - 160 < n;  // last sample of the window, real?
  for (int round = 0; round < 2; ++round) {
    const int64_t t_out = (int64_t(mask.size()) + 2 - 3) / 2 + 1;
    std::vector<bool> next;
    for (size_t i = 0; i < mask.size() && int64_t(next.size()) < t_out; i += 2) next.push_back(mask[i]);
    mask = next;
  }
  return std::count(mask.begin(), mask.end(), true);
}

// processing_gemma4.py's _compute_audio_num_tokens (the count vLLM uses).
int64_t processor_length_tokens(int64_t n) {
  if (n + 160 < 321) return 0;  // Python's floor division gives frames <= 0 here
  const int64_t frames = (n + 160 - 321) / 160 + 1;
  int64_t t = frames;
  for (int i = 0; i < 2; ++i) t = (t + 2 - 3) / 2 + 1;
  return std::min<int64_t>(t, 750);
}

TEST(AudioTokens, MatchTheProcessorsFormulas) {
  const ConformerAudioShape s;
  std::vector<int64_t> lengths = {161, 320, 321, 481, 640, 641, 800, 16000, 16001, 160000 + 3, 479999, 480000};
  for (int64_t n = 150; n < 2000; n += 7) lengths.push_back(n);
  for (int64_t n : lengths) {
    const int64_t t = conformer_audio_tokens(s, n);
    EXPECT_EQ(t, processor_mask_tokens(n)) << n;
    EXPECT_EQ(t, processor_length_tokens(n)) << n;
  }
  EXPECT_EQ(conformer_audio_tokens(s, 480000), 750);  // 30 s: the processor's cap
  EXPECT_EQ(conformer_audio_tokens(s, 16000 * 10), 250);
}

// ---- the tower -----------------------------------------------------------------

ConformerAudioShape tiny_shape(int chunk, int context_left, int layers) {
  ConformerAudioShape s;
  s.hidden = 32, s.layers = layers, s.heads = 4, s.channels0 = 128, s.channels1 = 4, s.conv_kernel = 5;
  s.chunk = chunk, s.context_left = context_left, s.output_proj_dims = 24, s.text_hidden = 16;
  return s;
}

ClippedLinear clipped(WeightMatrix w, bool clip) {
  ClippedLinear c;
  c.weight = std::move(w);
  if (clip) c.clip = ClippedLinear::Bounds{-2.5f, 2.5f, -1.5f, 1.5f};
  return c;
}

ConformerAudioWeights tiny_weights(const ConformerAudioShape& s, WeightFormat f, bool clip, uint32_t seed) {
  Rng rng(seed);
  const int H = s.hidden;
  ConformerAudioWeights w;
  w.conv0 = rng.normals(size_t(s.channels0) * 9, 1.f / 3.f);
  w.conv1 = rng.matrix(f, s.channels1, s.channels0 * 9);
  w.norm0 = rng.gains(size_t(s.channels0));
  w.norm1 = rng.gains(size_t(s.channels1));
  w.input_proj = rng.matrix(f, H, s.proj_input());
  w.layers.resize(size_t(s.layers));
  for (ConformerLayerWeights& l : w.layers) {
    for (ConformerFeedForward* ff : {&l.ffn1, &l.ffn2}) {
      ff->up = clipped(rng.matrix(f, 4 * H, H), clip);
      ff->down = clipped(rng.matrix(f, H, 4 * H), clip);
      ff->pre_norm = rng.gains(size_t(H)), ff->post_norm = rng.gains(size_t(H));
    }
    l.q_proj = clipped(rng.matrix(f, H, H), clip), l.k_proj = clipped(rng.matrix(f, H, H), clip);
    l.v_proj = clipped(rng.matrix(f, H, H), clip), l.post = clipped(rng.matrix(f, H, H), clip);
    l.relative_k_proj = rng.matrix(f, H, H);
    l.per_dim_scale = rng.normals(size_t(s.head_dim()), 0.5f);
    l.linear_start = clipped(rng.matrix(f, 2 * H, H), clip), l.linear_end = clipped(rng.matrix(f, H, H), clip);
    l.depthwise = rng.normals(size_t(H) * s.conv_kernel, 0.45f);
    l.conv_pre_norm = rng.gains(size_t(H)), l.conv_norm = rng.gains(size_t(H));
    l.norm_pre_attn = rng.gains(size_t(H)), l.norm_post_attn = rng.gains(size_t(H)), l.norm_out = rng.gains(size_t(H));
  }
  w.output_proj = rng.matrix(f, s.output_proj_dims, H);
  w.output_bias = rng.normals(size_t(s.output_proj_dims), 0.1f);
  w.embedding_projection = rng.matrix(f, s.text_hidden, s.output_proj_dims);
  return w;
}

void check_tower(const std::string& label, const ConformerAudioShape& s, bool clip, const std::vector<size_t>& lengths,
                 uint32_t seed) {
  ThreadsGuard threads;
  ExactGemmGuard exact;
  set_exact_gemm(true);
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
    const ConformerAudioWeights w = tiny_weights(s, f, clip, seed);
    for (size_t n : lengths) {
      const AudioClip c = random_clip(n, seed + uint32_t(n));
      ThreadPool::set_threads(1);
      const MediaEmbeddings one = conformer_audio_encode(s, w, c);
      ThreadPool::set_threads(2);
      const MediaEmbeddings two = conformer_audio_encode(s, w, c);
      const MediaEmbeddings want = reference_conformer_audio(s, w, c);
      EXPECT_EQ(want.rows, conformer_audio_tokens(s, int64_t(n))) << label;
      expect_close(label + (f == WeightFormat::F32 ? " f32 " : " bf16 ") + std::to_string(n) + " samples", one, two, want);
    }
  }
}

TEST(ConformerAudioTower, MatchesReferenceDefaultChunking) {
  // Chunk 12, context_left 13 (E2B/E4B): 1 token, a partial chunk, lengths
  // off every multiple, and 2 s (50 tokens, 5 attention chunks).
  check_tower("chunk 12/13", tiny_shape(12, 13, 2), true, {161, 1000, 4077, 32333}, 1);
}

TEST(ConformerAudioTower, MatchesReferenceSmallChunksAndShortTable) {
  // Chunk 4, context_left 7: the sinusoid table has 6 rows (c = 0..5) but
  // the query's own key sits at c = 6, past it: no relative term; many chunks.
  check_tower("chunk 4/7, no clip", tiny_shape(4, 7, 1), false, {1777, 9999}, 2);
  // Chunk 5, context_left 3: the window is narrower than a chunk.
  check_tower("chunk 5/3", tiny_shape(5, 3, 1), true, {5555}, 3);
}

TEST(ConformerAudioTower, ClampsMatter) {
  // gradient_clipping small enough to bite: both sides clamp in the same places.
  ConformerAudioShape s = tiny_shape(12, 13, 1);
  s.gradient_clipping = 0.7;
  check_tower("gradient_clipping 0.7", s, true, {6400}, 4);
  // And the clip bounds change the output (the path is not dead code).
  const ConformerAudioShape d = tiny_shape(12, 13, 1);
  const AudioClip c = random_clip(6400, 9);
  const MediaEmbeddings a = conformer_audio_encode(d, tiny_weights(d, WeightFormat::F32, true, 5), c);
  const MediaEmbeddings b = conformer_audio_encode(d, tiny_weights(d, WeightFormat::F32, false, 5), c);
  double diff = 0;
  for (size_t i = 0; i < a.data.size(); ++i) diff = std::max(diff, double(std::abs(a.data[i] - b.data[i])));
  EXPECT_GT(diff, 1e-2);
}

TEST(ConformerAudioTower, Errors) {
  const ConformerAudioShape s = tiny_shape(12, 13, 1);
  const ConformerAudioWeights w = tiny_weights(s, WeightFormat::F32, true, 6);
  expect_error<InputError>([&] { conformer_audio_encode(s, w, AudioClip{}); }, {"0 samples", "161"});
  expect_error<InputError>([&] { conformer_audio_encode(s, w, random_clip(160, 1)); }, {"160 samples", "161"});
  AudioClip nan = random_clip(1000, 1);
  nan.samples[500] = std::numeric_limits<float>::quiet_NaN();
  expect_error<InputError>([&] { conformer_audio_encode(s, w, nan); }, {"NaN", "500"});
  AudioClip slow = random_clip(1000, 1);
  slow.sample_rate = 8000;
  expect_error<InputError>([&] { conformer_audio_encode(s, w, slow); }, {"8000 Hz", "16000"});
  ConformerAudioWeights bad = w;
  bad.layers[0].depthwise.pop_back();
  expect_error<ConfigError>([&] { conformer_audio_encode(s, bad, random_clip(1000, 1)); }, {"layer 0", "depthwise"});
  bad = w;
  bad.input_proj = WeightMatrix::from_f32(WeightFormat::F32, 32, 8, std::vector<float>(256, 0.f).data());
  expect_error<ConfigError>([&] { conformer_audio_encode(s, bad, random_clip(1000, 1)); }, {"input_proj_linear", "[32, 8]"});
}

// ---- HF's checkpoint layout ----------------------------------------------------

// audio_config as transformers' Gemma4AudioConfig.to_dict() writes it.
json hf_audio_config(const ConformerAudioShape& s) {
  return {{"model_type", "gemma4_audio"},
          {"hidden_size", s.hidden},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"hidden_act", "silu"},
          {"subsampling_conv_channels", {s.channels0, s.channels1}},
          {"conv_kernel_size", s.conv_kernel},
          {"residual_weight", 0.5},
          {"attention_chunk_size", s.chunk},
          {"attention_context_left", s.context_left},
          {"attention_context_right", 0},
          {"attention_logit_cap", 50.0},
          {"attention_invalid_logits_value", -1e9},
          {"use_clipped_linears", true},
          {"rms_norm_eps", 1e-6},
          {"gradient_clipping", 1e10},
          {"output_proj_dims", s.output_proj_dims},
          {"initializer_range", 0.02},
          {"dtype", "float32"}};
}

// Every tensor of Gemma4AudioModel + embed_audio under the module paths of
// modeling_gemma4.py (Gemma4ForConditionalGeneration: model.audio_tower.*,
// model.embed_audio.*), with random values: written from this list, not
// from frontend_tensors, so that a wrong name in the loader shows.
std::vector<TensorToWrite> hf_audio_tensors(const ConformerAudioShape& s, int text_hidden, uint32_t seed) {
  Rng rng(seed);
  std::vector<TensorToWrite> out;
  auto put = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> v) {
    TensorToWrite t{name, DType::F32, std::move(shape), {}};
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    out.push_back(std::move(t));
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1, fan_in = 1;
    for (size_t i = 0; i < shape.size(); ++i) n *= shape[i], fan_in *= i > 0 ? shape[i] : 1;
    put(name, shape, rng.normals(size_t(n), float(1.0 / std::sqrt(double(fan_in)))));
  };
  auto gain = [&](const std::string& name, int64_t n) { put(name, {n}, rng.gains(size_t(n))); };
  const int64_t H = s.hidden, c0 = s.channels0, c1 = s.channels1;
  const std::string t = "model.audio_tower.";
  weight(t + "subsample_conv_projection.layer0.conv.weight", {c0, 1, 3, 3});
  gain(t + "subsample_conv_projection.layer0.norm.weight", c0);
  weight(t + "subsample_conv_projection.layer1.conv.weight", {c1, c0, 3, 3});
  gain(t + "subsample_conv_projection.layer1.norm.weight", c1);
  weight(t + "subsample_conv_projection.input_proj_linear.weight", {H, (c0 / 4) * c1});
  for (int i = 0; i < s.layers; ++i) {
    const std::string l = t + "layers." + std::to_string(i) + ".";
    auto clippable = [&](const std::string& name, int64_t out_f, int64_t in_f) {
      weight(l + name + ".linear.weight", {out_f, in_f});
      put(l + name + ".input_min", {}, {-3.f});
      put(l + name + ".input_max", {}, {3.f});
      put(l + name + ".output_min", {}, {-2.f});
      put(l + name + ".output_max", {}, {2.f});
    };
    for (const char* ff : {"feed_forward1.", "feed_forward2."}) {
      clippable(std::string(ff) + "ffw_layer_1", 4 * H, H);
      clippable(std::string(ff) + "ffw_layer_2", H, 4 * H);
      gain(l + ff + "pre_layer_norm.weight", H);
      gain(l + ff + "post_layer_norm.weight", H);
    }
    for (const char* p : {"q_proj", "k_proj", "v_proj", "post"}) clippable(std::string("self_attn.") + p, H, H);
    weight(l + "self_attn.relative_k_proj.weight", {H, H});
    put(l + "self_attn.per_dim_scale", {H / s.heads}, rng.normals(size_t(H / s.heads), 0.3f));
    clippable("lconv1d.linear_start", 2 * H, H);
    clippable("lconv1d.linear_end", H, H);
    weight(l + "lconv1d.depthwise_conv1d.weight", {H, 1, s.conv_kernel});
    gain(l + "lconv1d.pre_layer_norm.weight", H);
    gain(l + "lconv1d.conv_norm.weight", H);
    for (const char* n : {"norm_pre_attn", "norm_post_attn", "norm_out"}) gain(l + n + ".weight", H);
  }
  weight(t + "output_proj.weight", {s.output_proj_dims, H});
  put(t + "output_proj.bias", {s.output_proj_dims}, rng.normals(size_t(s.output_proj_dims), 0.05f));
  weight("model.embed_audio.embedding_projection.weight", {text_hidden, s.output_proj_dims});
  return out;
}

// Tensor names of a safetensors file (its JSON header).
std::vector<std::string> safetensors_names(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string header(len, '\0');
  in.read(header.data(), std::streamsize(len));
  std::vector<std::string> names;
  const json j = json::parse(header);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "__metadata__") names.push_back(it.key());
  return names;
}

// tiny-gemma4 (vision encoder + decoder) plus an audio_config and the audio
// tensors in a second shard, as an E2B/E4B checkpoint holds them.
std::string gemma4_audio_model(const std::string& tag, const ConformerAudioShape& s, uint32_t seed,
                               const std::function<void(std::vector<TensorToWrite>&, json&)>& edit = {}) {
  const std::string base = test::tiny_model_dir("tiny-gemma4");
  const std::string dir = test::temp_dir("audio-conformer-" + tag);
  for (const auto& e : fs::directory_iterator(base))
    if (e.path().filename() != "model.safetensors") fs::copy(e.path(), fs::path(dir) / e.path().filename(), fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(base) / "model.safetensors", fs::path(dir) / "model-00001-of-00002.safetensors",
                fs::copy_options::overwrite_existing);
  json config = json::parse(test::read_file(base + "/config.json"));
  config["audio_config"] = hf_audio_config(s);
  std::vector<TensorToWrite> audio = hf_audio_tensors(s, config["text_config"]["hidden_size"].get<int>(), seed);
  if (edit) edit(audio, config);
  test::write_file(dir + "/config.json", config.dump(2));
  write_safetensors(dir + "/model-00002-of-00002.safetensors", audio);
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  for (const std::string& n : safetensors_names(dir + "/model-00001-of-00002.safetensors"))
    index["weight_map"][n] = "model-00001-of-00002.safetensors";
  for (const TensorToWrite& t : audio) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  test::write_file(dir + "/model.safetensors.index.json", index.dump());
  return dir;
}

struct Loaded {
  FrontendConfig config;
  FrontendWeights weights;
};

Loaded load(const std::string& dir) {
  Loaded l;
  l.config = load_frontend_config(dir, load_model_config(dir));
  const TensorStore store = TensorStore::open_dir(dir);
  if (!load_frontend_weights(l.config, store, l.weights)) throw FormatError(dir + ": no frontend weights");
  return l;
}

TEST(ConformerAudioCheckpoint, HfLayoutLoadsAndMatchesReference) {
  const ConformerAudioShape s = tiny_shape(12, 13, 2);
  const std::string dir = gemma4_audio_model("layout", s, 11);
  const Loaded l = load(dir);
  ASSERT_EQ(l.config.audio, AudioFrontend::Conformer);
  ASSERT_EQ(l.config.vision, VisionFrontend::Gemma4Encoder);
  EXPECT_EQ(l.config.conformer.hidden, 32);
  EXPECT_EQ(l.config.conformer.channels1, 4);
  EXPECT_EQ(l.config.conformer.text_hidden, 64);
  ASSERT_TRUE(l.weights.conformer.layers[1].post.clip.has_value());
  EXPECT_EQ(l.weights.conformer.layers[1].post.clip->output_max, 2.f);

  const ModelConfig decoder = load_model_config(dir);
  const auto frontend = MediaFrontend::load(dir, decoder, TensorStore::open_dir(dir));
  ASSERT_TRUE(frontend->has_audio()) << frontend->why_no_audio();
  EXPECT_NE(frontend->describe().find("conformer audio tower (2 layers)"), std::string::npos) << frontend->describe();
  for (size_t n : {size_t(3000), size_t(16000 * 2 + 99)}) {
    const AudioClip clip = random_clip(n, uint32_t(n));
    const MediaEmbeddings rows = frontend->encode_audio(clip);
    EXPECT_EQ(rows.rows, frontend->count_audio_tokens(clip)) << n;
    ThreadsGuard threads;
    ExactGemmGuard exact;
    set_exact_gemm(true);
    const MediaEmbeddings want = reference_conformer_audio(l.config.conformer, l.weights.conformer, clip);
    const MediaEmbeddings fast = frontend->encode_audio(clip);
    expect_close("checkpoint " + std::to_string(n) + " samples", fast, fast, want);
  }
  // Over 30 s: refused with the limit named (HF would cut the clip to 30 s).
  expect_error<InputError>([&] { frontend->count_audio_tokens(random_clip(480001, 1)); }, {"30 s", "480000", "750"});
  expect_error<InputError>([&] { frontend->encode_audio(random_clip(480001, 1)); }, {"30 s"});
  EXPECT_EQ(frontend->count_audio_tokens(random_clip(480000, 1)), 750);
  expect_error<InputError>([&] { frontend->count_audio_tokens(random_clip(100, 1)); }, {"100 samples", "161"});
  expect_error<InputError>([&] { frontend->encode_audio(AudioClip{}); }, {"empty"});
}

TEST(ConformerAudioCheckpoint, BadTensorsAndConfigsAreNamed) {
  const ConformerAudioShape s = tiny_shape(12, 13, 1);
  const std::string missing = gemma4_audio_model("missing", s, 12, [](std::vector<TensorToWrite>& t, json&) {
    t.erase(std::remove_if(t.begin(), t.end(), [](const TensorToWrite& x) { return x.name.find("relative_k_proj") != std::string::npos; }),
            t.end());
  });
  expect_error<FormatError>([&] { load(missing); }, {"model.audio_tower.layers.0.self_attn.relative_k_proj.weight"});
  const std::string shape = gemma4_audio_model("shape", s, 12, [](std::vector<TensorToWrite>& t, json&) {
    for (TensorToWrite& x : t)
      if (x.name == "model.audio_tower.layers.0.lconv1d.depthwise_conv1d.weight") x.shape = {32, 5, 1};
  });
  expect_error<FormatError>([&] { load(shape); }, {"depthwise_conv1d", "[32, 5, 1]", "[32, 1, 5]"});
  const std::string nan = gemma4_audio_model("nan", s, 12, [](std::vector<TensorToWrite>& t, json&) {
    for (TensorToWrite& x : t)
      if (x.name == "model.audio_tower.output_proj.bias") {
        const float q = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(x.bytes.data() + 4, &q, 4);
      }
  });
  expect_error<FormatError>([&] { load(nan); }, {"output_proj.bias", "non-finite"});
  // A clip bound of +-inf is HF's default buffer value: no clamp on that side. NaN is refused.
  auto bound = [&](const std::string& tag, float value) {
    return gemma4_audio_model(tag, s, 12, [value](std::vector<TensorToWrite>& t, json&) {
      for (TensorToWrite& x : t)
        if (x.name == "model.audio_tower.layers.0.self_attn.q_proj.input_max") std::memcpy(x.bytes.data(), &value, 4);
    });
  };
  const Loaded open = load(bound("inf", std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(std::isinf(open.weights.conformer.layers[0].q_proj.clip->input_max));
  const AudioClip clip = random_clip(4000, 3);
  {
    ExactGemmGuard exact;
    set_exact_gemm(true);
    const MediaEmbeddings fast = conformer_audio_encode(open.config.conformer, open.weights.conformer, clip);
    expect_close("infinite clip bound", fast, fast, reference_conformer_audio(open.config.conformer, open.weights.conformer, clip));
  }
  expect_error<FormatError>([&] { load(bound("nanbound", std::numeric_limits<float>::quiet_NaN())); }, {"q_proj.input_max", "non-finite"});

  const ModelConfig decoder = load_model_config(test::tiny_model_dir("tiny-gemma4"));
  auto parse_with = [&](const std::string& field, const json& value) {
    json root = {{"audio_config", hf_audio_config(s)}};
    root["audio_config"][field] = value;
    return parse_frontend_config(root, decoder, "config.json");
  };
  expect_error<ConfigError>([&] { parse_with("attention_context_right", 2); }, {"attention_context_right"});
  expect_error<ConfigError>([&] { parse_with("subsampling_conv_channels", json::array({64, 4})); },
                            {"subsampling_conv_channels", "32"});
  expect_error<ConfigError>([&] { parse_with("subsampling_conv_channels", json::array({128})); }, {"subsampling_conv_channels"});
  expect_error<ConfigError>([&] { parse_with("hidden_act", "gelu"); }, {"hidden_act", "gelu"});
  expect_error<ConfigError>([&] { parse_with("num_attention_heads", 5); }, {"num_attention_heads"});
  EXPECT_EQ(parse_with("hidden_act", "silu").audio, AudioFrontend::Conformer);
  // An unknown audio tower stays a clear refusal, not a load failure.
  const FrontendConfig other = parse_with("model_type", "whisper");
  EXPECT_EQ(other.audio, AudioFrontend::None);
  EXPECT_NE(other.audio_unsupported.find("whisper"), std::string::npos);
}

TEST(ConformerAudioCheckpoint, ProcessorFeatureSettingsAreChecked) {
  const ConformerAudioShape s = tiny_shape(12, 13, 1);
  const std::string dir = gemma4_audio_model("processor", s, 14);
  const ModelConfig decoder = load_model_config(dir);
  // What Gemma4AudioFeatureExtractor().to_dict() holds: the defaults load.
  json fe = {{"feature_extractor_type", "Gemma4AudioFeatureExtractor"}, {"feature_size", 128}, {"sampling_rate", 16000},
             {"padding_value", 0.0}, {"return_attention_mask", true}, {"min_frequency", 0.0}, {"max_frequency", 8000.0},
             {"preemphasis", 0.0}, {"preemphasis_htk_flavor", true}, {"fft_overdrive", false}, {"dither", 0.0},
             {"input_scale_factor", 1.0}, {"frame_length", 320}, {"hop_length", 160}, {"fft_length", 512},
             {"mel_floor", 0.001}, {"per_bin_mean", nullptr}, {"per_bin_stddev", nullptr}};
  test::write_file(dir + "/processor_config.json", json{{"feature_extractor", fe}, {"audio_seq_length", 750}}.dump());
  EXPECT_EQ(load_frontend_config(dir, decoder).audio, AudioFrontend::Conformer);
  fe["preemphasis"] = 0.97;
  test::write_file(dir + "/processor_config.json", json{{"feature_extractor", fe}}.dump());
  expect_error<ConfigError>([&] { load_frontend_config(dir, decoder); }, {"processor_config.json", "preemphasis"});
  fe["preemphasis"] = 0.0;
  fe["per_bin_mean"] = std::vector<double>(128, 0.5);
  test::write_file(dir + "/preprocessor_config.json", fe.dump());
  fs::remove(dir + "/processor_config.json");
  expect_error<ConfigError>([&] { load_frontend_config(dir, decoder); }, {"preprocessor_config.json", "per_bin_mean"});
}

// ---- end to end ----------------------------------------------------------------

using test::write_wav;

TEST(ConformerAudioEndToEnd, WavThroughTheEngine) {
  const ConformerAudioShape s = tiny_shape(12, 13, 2);
  const std::string dir = gemma4_audio_model("engine", s, 13);
  const std::string work = test::temp_dir("audio-conformer-engine-work");
  const AudioClip clip = random_clip(16000 + 1234, 77);  // 1.08 s: 107 frames, 27 tokens
  write_wav(work + "/clip.wav", clip.samples);
  const AudioClip read = read_audio_file(work + "/clip.wav");

  const auto engine = Engine::load(dir);
  EXPECT_NE(engine->describe_media().find("conformer audio tower"), std::string::npos) << engine->describe_media();
  const MediaRows rows = engine->embed_media(work + "/clip.wav", Modality::Audio);
  ASSERT_EQ(rows.rows, 27);
  ASSERT_EQ(rows.hidden, engine->hidden_size());
  // The engine's rows are the tower's on the decoded clip.
  const Loaded l = load(dir);
  const MediaEmbeddings tower = conformer_audio_encode(l.config.conformer, l.weights.conformer, read);
  EXPECT_EQ(rows.data, tower.data);
  {
    ExactGemmGuard exact;
    set_exact_gemm(true);
    expect_close("engine rows vs reference", conformer_audio_encode(l.config.conformer, l.weights.conformer, read),
                 conformer_audio_encode(l.config.conformer, l.weights.conformer, read),
                 reference_conformer_audio(l.config.conformer, l.weights.conformer, read));
  }

  // The chat prompt holds 27 <|audio|> tokens, and the rows it splices in are the tower's.
  ChatTurn turn;
  turn.audio = {work + "/clip.wav"};
  turn.text = "Transcribe this.";
  const TokenInputs wav_ids = engine->encode_chat(turn);
  const json config = json::parse(test::read_file(dir + "/config.json"));
  const int audio_id = config["audio_token_id"].get<int>();
  EXPECT_EQ(std::count(wav_ids.tokens.begin(), wav_ids.tokens.end(), audio_id), 27);
  EXPECT_EQ(wav_ids.media, tower.data);

  // Generating from the WAV and from its rows as an embeddings file: same
  // tokens, same (finite) logits.
  write_npy(work + "/clip.npy", {rows.rows, int64_t(rows.hidden)}, rows.data.data());
  turn.audio = {work + "/clip.npy"};
  const TokenInputs npy_ids = engine->encode_chat(turn);
  EXPECT_EQ(npy_ids.tokens, wav_ids.tokens);
  std::vector<BatchResult> results;
  for (const TokenInputs* ids : {&wav_ids, &npy_ids}) {
    Batch b(engine, 1);
    GenerateOptions g;
    g.max_new_tokens = 3;
    g.keep_step_logits = true;
    b.run_turn(*ids, g);
    results.push_back(b.result());
  }
  ASSERT_FALSE(results[0].step_logits.empty());
  for (float v : results[0].step_logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(results[0].tokens, results[1].tokens);
  EXPECT_EQ(results[0].step_logits, results[1].step_logits);

  // export-onnx: the text and vision graphs; the conformer has no speech graph (not exported).
  const auto onnx = test::run_splitdec("export-onnx --model " + dir + " --out " + work + "/onnx");
  EXPECT_EQ(onnx.exit_code, 0) << onnx.output;
  EXPECT_TRUE(fs::exists(work + "/onnx/vision.onnx"));
  EXPECT_FALSE(fs::exists(work + "/onnx/speech.onnx"));

  // The CLI: generate --audio with the WAV runs.
  const auto r = test::run_splitdec("generate --model " + dir + " --chat --audio " + work +
                                    "/clip.wav --prompt 'Transcribe' --max-new-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The server's input_audio parts: a base64 WAV through the same frontend.
TEST(ConformerAudioEndToEnd, ServerInputAudioParts) {
  const std::string dir = gemma4_audio_model("serve", tiny_shape(12, 13, 1), 15);
  const std::string work = test::temp_dir("audio-conformer-serve-work");
  write_wav(work + "/clip.wav", random_clip(8000, 5).samples);
  write_wav(work + "/tiny.wav", random_clip(100, 5).samples);
  test::ServeProcess server("--model " + dir);
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(120, 0);
  auto body = [&](const std::string& wav) {
    return json{{"messages", {{{"role", "user"},
                               {"content", {{{"type", "input_audio"},
                                             {"input_audio", {{"data", test::base64_encode(test::read_file(wav))}, {"format", "wav"}}}},
                                            {{"type", "text"}, {"text", "Transcribe this."}}}}}}},
                {"max_tokens", 2}}
        .dump();
  };
  auto ok = c.Post("/v1/chat/completions", body(work + "/clip.wav"), "application/json");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200) << ok->body;
  const json answer = json::parse(ok->body);
  // 8000 samples: 49 frames, 13 audio tokens, plus the turn's text.
  EXPECT_GT(answer["usage"]["prompt_tokens"].get<int>(), 13) << ok->body;
  auto short_clip = c.Post("/v1/chat/completions", body(work + "/tiny.wav"), "application/json");
  ASSERT_TRUE(short_clip);
  EXPECT_EQ(short_clip->status, 400) << short_clip->body;
  EXPECT_NE(short_clip->body.find("161"), std::string::npos) << short_clip->body;
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(30000), 0);
}

}  // namespace
