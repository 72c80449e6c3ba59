#include "media_benchmarks.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "media/frontend_weights.h"
#include "media/image_patches.h"
#include "media/media_frontend.h"
#include "model/gemma_model.h"
#include "tools/make_model.h"
#include "pipeline/session.h"

namespace splitdec::bench {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Random bf16 weights for every tensor of `config`'s frontends (the list the
// loader walks), scaled to keep activations near unit size.
FrontendWeights random_frontend(const FrontendConfig& config) {
  FrontendWeights w;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const FrontendTensor& t : frontend_tensors(config, w)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (t.matrix) {
      const bool transposed = t.kind == FrontendTensor::TransposedMatrix;
      const int out = int(transposed ? t.shape[1] : t.shape[0]), in = int(n / out);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng) * std::sqrt(3.f / float(in));
      *t.matrix = WeightMatrix::from_f32(WeightFormat::BF16, out, in, v.data());
    } else if (t.values) {
      t.values->resize(size_t(n));
      for (float& x : *t.values) x = t.kind == FrontendTensor::Gain ? 1.f + 0.1f * u(rng) : 0.1f * u(rng);
    } else if (t.scalar) {
      *t.scalar = t.kind == FrontendTensor::ClipLow ? -3.f : 3.f;
    }
  }
  return w;
}

RgbImage random_image(int width, int height) {
  RgbImage img;
  img.width = width, img.height = height;
  img.pixels.resize(size_t(width) * size_t(height) * 3);
  std::mt19937 rng(11);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t((i / 3 % 251 + rng() % 5) & 255);
  return img;
}

// FLOPs of one SigLIP image: patch embedding, per layer QKV/O and MLP
// linears and attention (QK^T and PV over all N^2 pairs), projector.
double siglip_flops(const SiglipShape& s, double* linear_part) {
  const double N = double(s.grid()) * s.grid(), H = s.hidden, I = s.intermediate;
  const double linear = 2 * N * s.patch_dim() * H + s.layers * 2 * N * (4 * H * H + 2 * H * I) + 2 * s.tokens() * H * s.text_hidden;
  const double attention = s.layers * 4 * N * N * H;
  *linear_part = linear;
  return linear + attention;
}

// FLOPs of one Gemma-4 vision-encoder image of n patches: patch embedding,
// per layer QKV/O and the gated MLP, attention over all n^2 pairs, projector.
double gemma4_vision_flops(const Gemma4VisionShape& s, double n, double tokens, double* linear_part) {
  const double H = s.hidden, I = s.intermediate, A = double(s.heads) * s.head_dim, KV = double(s.kv_heads) * s.head_dim;
  const double linear = 2 * n * s.patch_dim() * H + s.layers * 2 * n * (2 * H * A + 2 * H * KV + 3 * H * I) +
                        2 * tokens * H * s.text_hidden;
  const double attention = s.layers * 4 * n * n * A;
  *linear_part = linear;
  return linear + attention;
}

double unified_flops(const UnifiedVisionShape& s, int64_t tokens) {
  return 2.0 * double(tokens) * (double(s.patch_dim()) * s.embed_dim + double(s.embed_dim) * s.text_hidden);
}

// One timed run after a warm-up run (the towers run for seconds; the
// machines are shared, so the best of two is reported).
double best_of_two(const std::function<void()>& fn) {
  double best = 1e30;
  for (int k = 0; k < 2; ++k) {
    const double t0 = now_s();
    fn();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

}  // namespace

json media_frontends(double peak_gflops, bool quick) {
  std::printf("\n== media frontends (bf16 weights): image encode time, FLOP rate as a fraction of GEMM peak (%.1f GFLOP/s)\n",
              peak_gflops);
  json rows = json::array();
  {
    // Gemma-3's SigLIP-So400m at 896 x 896 (27 layers; --quick runs 3 and
    // scales the layer part, said in the row).
    FrontendConfig c;
    c.vision = VisionFrontend::Siglip;
    c.siglip.text_hidden = 3840;
    const int layers = quick ? 3 : c.siglip.layers;
    c.siglip.layers = layers;
    const FrontendWeights w = random_frontend(c);
    const ImagePatches patches = siglip_patches(random_image(1280, 960), c.siglip.image_size, c.siglip.patch);
    const double t = best_of_two([&] { siglip_encode(c.siglip, w.siglip, patches); });
    double linear = 0;
    const double flops = siglip_flops(c.siglip, &linear);
    const double gflops = flops / t / 1e9;
    std::printf("%-44s %8.2f s  %7.1f GFLOP/s  %.0f%% of GEMM peak (linear layers are %.0f%% of the FLOPs)\n",
                ("gemma3 SigLIP 896px, " + std::to_string(layers) + " of 27 layers").c_str(), t, gflops,
                100 * gflops / peak_gflops, 100 * linear / flops);
    rows.push_back({{"frontend", "gemma3 siglip"}, {"layers", layers}, {"tokens", c.siglip.tokens()}, {"seconds", t},
                    {"seconds_27_layers_estimate", t * 27.0 / layers}, {"tflop", flops / 1e12}, {"gflops", gflops},
                    {"fraction_of_peak", gflops / peak_gflops}});
  }
  {
    // The Gemma-4 vision encoder of 26B-A4B / 31B (27 layers, head_dim 72,
    // standardize) at the 280 budget, projecting to 31B's 5376; --quick runs
    // 3 layers as SigLIP does.
    FrontendConfig c;
    c.vision = VisionFrontend::Gemma4Encoder;
    c.gemma4 = {.hidden = 1152, .intermediate = 4304, .layers = quick ? 3 : 27, .heads = 16, .kv_heads = 16,
                .head_dim = 72, .standardize = true, .text_hidden = 5376};
    const FrontendWeights w = random_frontend(c);
    const ImagePatches patches = gemma4_patches(random_image(1280, 960), 280, c.gemma4.patch, c.gemma4.pool, false);
    const double n = double(patches.rows) * patches.cols, tokens = n / 9;
    const double t = best_of_two([&] { gemma4_vision_encode(c.gemma4, w.gemma4, patches); });
    double linear = 0;
    const double flops = gemma4_vision_flops(c.gemma4, n, tokens, &linear);
    const double gflops = flops / t / 1e9;
    std::printf("%-44s %8.2f s  %7.1f GFLOP/s  %.0f%% of GEMM peak (linear layers are %.0f%% of the FLOPs)\n",
                ("gemma4 encoder (31B) 1280x960 @280, " + std::to_string(c.gemma4.layers) + " of 27 layers").c_str(),
                t, gflops, 100 * gflops / peak_gflops, 100 * linear / flops);
    rows.push_back({{"frontend", "gemma4 vision encoder"}, {"layers", c.gemma4.layers}, {"budget", 280},
                    {"patches", n}, {"tokens", tokens}, {"seconds", t}, {"seconds_27_layers_estimate", t * 27.0 / c.gemma4.layers},
                    {"tflop", flops / 1e12}, {"gflops", gflops}, {"fraction_of_peak", gflops / peak_gflops}});
  }
  {
    // gemma4_unified's patch embedder at the 280 and 1120 budgets.
    FrontendConfig c;
    c.vision = VisionFrontend::UnifiedPatches;
    c.unified.text_hidden = 3840;
    const FrontendWeights w = random_frontend(c);
    for (int budget : {280, 1120}) {
      const RgbImage img = random_image(1920, 1080);
      ImagePatches patches;
      const double tp = best_of_two([&] { patches = gemma4_patches(img, budget, 16, 3, true); });
      const int64_t tokens = int64_t(patches.rows) * patches.cols;
      const double t = best_of_two([&] { unified_image_encode(c.unified, w.unified, patches); });
      const double gflops = unified_flops(c.unified, tokens) / t / 1e9;
      std::printf("%-44s %8.3f s  %7.1f GFLOP/s  %.0f%% of GEMM peak (resize + patches %.3f s)\n",
                  ("gemma4_unified embedder, 1920x1080 @" + std::to_string(budget) + ": " + std::to_string(tokens) + " tokens").c_str(),
                  t, gflops, 100 * gflops / peak_gflops, tp);
      rows.push_back({{"frontend", "gemma4_unified"}, {"budget", budget}, {"tokens", tokens}, {"seconds", t},
                      {"preprocess_seconds", tp}, {"gflops", gflops}, {"fraction_of_peak", gflops / peak_gflops}});
    }
  }
  return rows;
}

json audio_tower(double peak_gflops) {
  std::printf("\n== Gemma-4 E2B/E4B conformer audio tower (bf16 weights), 10 s clip\n");
  FrontendConfig c;
  c.audio = AudioFrontend::Conformer;
  c.conformer.text_hidden = 1536;  // E2B (E4B: 2560, one more small projection)
  const FrontendWeights w = random_frontend(c);
  AudioClip clip;
  clip.samples.resize(size_t(10) * kAudioSampleRate);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  for (size_t i = 0; i < clip.samples.size(); ++i) clip.samples[i] = 0.4f * float(std::sin(0.02 * double(i))) + u(rng);
  const ConformerAudioShape& s = c.conformer;
  const int64_t tokens = conformer_audio_tokens(s, int64_t(clip.samples.size()));
  const double features_s = best_of_two([&] { log_mel_features(clip.samples, s.features); });
  const double t = best_of_two([&] { conformer_audio_encode(s, w.conformer, clip); });
  // Per token and layer: two FFNs (16 H^2 each), q/k/v/post (8 H^2), light
  // conv (6 H^2); plus the second subsampling conv, input_proj and the two projections.
  const double H = s.hidden, n = double(tokens);
  const double flops = s.layers * n * 46 * H * H + 2 * n * s.subsampled_bins() * s.channels1 * s.channels0 * 9 +
                       2 * n * (s.proj_input() * H + H * s.output_proj_dims + double(s.output_proj_dims) * s.text_hidden);
  const double gflops = flops / t / 1e9;
  std::printf("%-44s %8.2f s  %7.1f GFLOP/s  %.0f%% of GEMM peak (log-mel %.3f s; %lld tokens)\n",
              "conformer 12 x 1024, 10 s clip", t, gflops, 100 * gflops / peak_gflops, features_s, (long long)tokens);
  return json::array({{{"frontend", "gemma4 conformer audio"}, {"layers", s.layers}, {"clip_seconds", 10},
                       {"tokens", tokens}, {"seconds", t}, {"log_mel_seconds", features_s}, {"gflop", flops / 1e9},
                       {"gflops", gflops}, {"fraction_of_peak", gflops / peak_gflops}}});
}

json media_time_to_first_token(const std::string& work, bool quick) {
  std::printf("\n== time to first token, image + question (real-size frontends, %s decoder layers, bf16)\n",
              quick ? "1" : "4");
  json rows = json::array();
  for (const char* preset : {"gemma3-12b", "gemma4-12b", "gemma4-31b"}) {
    MakeModelOptions o;
    o.preset = preset;
    o.out_dir = work + "/" + preset + "-media";
    o.seed = 1;
    o.dtype = DType::BF16;
    o.layers = quick ? 1 : 4;
    make_model(o);
    const Model model = Model::load(o.out_dir);
    const ModelConfig& c = model.config();
    const auto frontend = MediaFrontend::load(o.out_dir, c, TensorStore::open_dir(o.out_dir));
    const RgbImage img = random_image(1280, 960);

    const double t0 = now_s();
    const MediaEmbeddings rows_of_image = frontend->encode_image(img);  // the model's default budget (gemma4-12b: 280)
    const double t_frontend = now_s() - t0;

    // <bos> 16 text tokens <boi> image <eoi> 16 text tokens.
    PromptBatch p;
    p.batch = 1;
    auto text = [&](int n) {
      for (int k = 0; k < n; ++k) p.tokens.push_back(300 + k), p.modality.push_back(Modality::Text);
    };
    p.tokens.push_back(c.bos_token_id), p.modality.push_back(Modality::Text);
    text(16);
    p.tokens.push_back(c.boi_token_id), p.modality.push_back(Modality::Text);
    for (int64_t k = 0; k < rows_of_image.rows; ++k) p.tokens.push_back(c.image_token_id), p.modality.push_back(Modality::Image);
    p.tokens.push_back(c.eoi_token_id), p.modality.push_back(Modality::Text);
    text(16);
    p.seq = int(p.tokens.size());
    p.attention_mask.assign(p.tokens.size(), 1);
    p.media = rows_of_image.data;

    SessionOptions so;
    so.capacity = p.seq + 8;
    Session session(model, 1, so);
    const double t1 = now_s();
    session.append(p);
    const double t_prefill = now_s() - t1;
    const double t2 = now_s();
    session.decode({301});
    const double t_step = now_s() - t2;
    const double total = t_frontend + t_prefill + t_step;
    std::printf("%-12s %4d prompt tokens (%lld image): TTFT %7.2f s = frontend %.0f%% (%.2f s) + prefill %.0f%% (%.2f s, %d layers) + "
                "first step %.0f%% (%.3f s)\n",
                preset, p.seq, static_cast<long long>(rows_of_image.rows), total, 100 * t_frontend / total, t_frontend,
                100 * t_prefill / total, t_prefill, c.num_layers, 100 * t_step / total, t_step);
    rows.push_back({{"model", preset}, {"decoder_layers", c.num_layers}, {"frontend", frontend->describe()},
                    {"prompt_tokens", p.seq}, {"image_tokens", rows_of_image.rows}, {"ttft_seconds", total},
                    {"frontend_seconds", t_frontend}, {"prefill_seconds", t_prefill}, {"first_step_seconds", t_step}});
    fs::remove_all(o.out_dir);
  }
  return rows;
}

}  // namespace splitdec::bench
