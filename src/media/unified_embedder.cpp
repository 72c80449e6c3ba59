#include "media/unified_embedder.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear.h"
#include "media/tower_ops.h"

namespace splitdec {

namespace {

using namespace tower;

const std::string kImage = "gemma4_unified image embedder: ";
const std::string kAudio = "gemma4_unified audio embedder: ";

void check_inputs(const UnifiedVisionShape& s, const UnifiedVisionWeights& w, const ImagePatches& p) {
  if (p.rows <= 0 || p.cols <= 0)
    throw InputError(kImage + "the image has " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " patches (none)");
  if (p.rows > s.positions || p.cols > s.positions)
    throw InputError(kImage + std::to_string(p.rows) + " x " + std::to_string(p.cols) +
                     " patches exceed the position table, which holds " + std::to_string(s.positions) + " positions per side");
  if (p.patch_dim != s.patch_dim())
    throw InputError(kImage + "patches of " + std::to_string(p.patch_dim) + " values, the model takes " +
                     std::to_string(s.patch_dim()) + " (" + std::to_string(s.patch) + " x " + std::to_string(s.patch) + " x 3)");
  const int64_t n = int64_t(p.rows) * p.cols;
  if (int64_t(p.data.size()) != n * p.patch_dim)
    throw InputError(kImage + "the patch buffer holds " + std::to_string(p.data.size()) + " values, " + std::to_string(p.rows) +
                     " x " + std::to_string(p.cols) + " patches of " + std::to_string(p.patch_dim) + " need " +
                     std::to_string(n * p.patch_dim));
  const int P = s.patch_dim(), D = s.embed_dim;
  if (D <= 0) throw ConfigError(kImage + "embed_dim " + std::to_string(D) + " is not positive");
  expect_values(w.ln1_weight, P, kImage + "patch_ln1 weight");
  expect_values(w.ln1_bias, P, kImage + "patch_ln1 bias");
  expect_matrix(w.dense, D, P, kImage + "patch_dense");
  expect_values(w.dense_bias, D, kImage + "patch_dense bias");
  expect_values(w.ln2_weight, D, kImage + "patch_ln2 weight");
  expect_values(w.ln2_bias, D, kImage + "patch_ln2 bias");
  expect_values(w.pos_embedding, int64_t(s.positions) * 2 * D, kImage + "pos_embedding");
  expect_values(w.pos_norm_weight, D, kImage + "pos_norm weight");
  expect_values(w.pos_norm_bias, D, kImage + "pos_norm bias");
  expect_matrix(w.projection, projection_width(w.projection, s.text_hidden), D, kImage + "embedding_projection");
}

}  // namespace

MediaEmbeddings unified_image_encode(const UnifiedVisionShape& s, const UnifiedVisionWeights& w, const ImagePatches& p) {
  check_inputs(s, w, p);
  const int N = p.rows * p.cols, cols = p.cols, P = s.patch_dim(), D = s.embed_dim;

  // LN1 over the raw patch -> patch_dense as one GEMM.
  std::vector<float> normed(size_t(N) * P), h(size_t(N) * D);
  layer_norm_rows(p.data.data(), w.ln1_weight.data(), w.ln1_bias.data(), N, P, s.layer_norm_eps, normed.data());
  linear(normed.data(), N, w.dense, h.data());

  // Per patch, in place: + bias -> LN2 -> + pos[x, 0] + pos[y, 1] -> pos_norm -> weightless RMSNorm.
  for_rows(N, D, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* r = h.data() + size_t(t) * D;
      for (int i = 0; i < D; ++i) r[i] += w.dense_bias[size_t(i)];
      layer_norm_row(r, w.ln2_weight.data(), w.ln2_bias.data(), D, s.layer_norm_eps, r);
      const float* px = w.pos_embedding.data() + (size_t(t % cols) * 2 + 0) * D;
      const float* py = w.pos_embedding.data() + (size_t(t / cols) * 2 + 1) * D;
      for (int i = 0; i < D; ++i) r[i] += px[i] + py[i];
      layer_norm_row(r, w.pos_norm_weight.data(), w.pos_norm_bias.data(), D, s.layer_norm_eps, r);
      ops::rms_norm(r, nullptr, 1, D, s.rms_norm_eps, false, r);
    }
  });

  MediaEmbeddings result;
  result.rows = N;
  result.data.resize(size_t(N) * w.projection.out);
  linear(h.data(), N, w.projection, result.data.data());
  return result;
}

MediaEmbeddings unified_audio_encode(const UnifiedAudioShape& s, const WeightMatrix& projection, const AudioClip& clip) {
  if (clip.samples.empty()) throw InputError(kAudio + "the audio clip is empty (0 samples)");
  if (clip.sample_rate != kAudioSampleRate)
    throw InputError(kAudio + "the clip is sampled at " + std::to_string(clip.sample_rate) + " Hz, the model takes " +
                     std::to_string(kAudioSampleRate) + " Hz");
  if (s.frame <= 0) throw ConfigError(kAudio + "frame of " + std::to_string(s.frame) + " samples is not positive");
  expect_matrix(projection, projection_width(projection, s.text_hidden), s.frame, kAudio + "embedding_projection");

  // Frames of `frame` samples, the last zero-padded -> weightless RMSNorm -> projection.
  const size_t frame = size_t(s.frame);
  const int64_t frames = int64_t((clip.samples.size() + frame - 1) / frame);
  if (frames > INT32_MAX) throw InputError(kAudio + "the clip has " + std::to_string(frames) + " frames, too many to embed");
  std::vector<float> x(size_t(frames) * frame, 0.f);
  std::copy(clip.samples.begin(), clip.samples.end(), x.begin());
  rms_norm_rows(x.data(), nullptr, frames, s.frame, s.rms_norm_eps, false, x.data());

  MediaEmbeddings result;
  result.rows = frames;
  result.data.resize(size_t(frames) * projection.out);
  linear(x.data(), int(frames), projection, result.data.data());
  return result;
}

}  // namespace splitdec
