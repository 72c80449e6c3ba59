// The conformer audio tower of Gemma-4 E2B/E4B (Hugging Face's
// Gemma4AudioModel + Gemma4MultimodalEmbedder; FRONTENDS.md section 2.4):
//   log-mel [T, 128] (audio_log_mel.h)
//   -> 2 x (Conv2d 3x3 stride 2 pad 1 over (time, mel), no bias -> LayerNorm
//      over channels, no bias -> ReLU): [T/4, 32, c1] flattened (mel, channel)
//   -> input_proj_linear -> hidden
//   -> layers of: FFN/2 (clamp, RMSNorm, clipped linear x4, SiLU, clipped
//      linear, clamp, RMSNorm, x 0.5, + residual)
//      -> chunked local attention (clamp, RMSNorm, q/k/v clipped linears,
//         q x head_dim^-0.5 / ln 2 x softplus(per_dim_scale), k x ln(1+e) / ln 2,
//         logits q.k + q.relative_k_proj(sinusoid of the distance), tanh
//         softcap 50, each query seeing itself and the context_left - 2 keys
//         before it, post clipped linear, clamp, RMSNorm, + residual)
//      -> light conv (RMSNorm, clipped linear x2, GLU, causal depthwise conv,
//         clamp, RMSNorm, SiLU, clipped linear, + residual)
//      -> FFN/2 -> clamp -> RMSNorm
//   -> output_proj (+ bias) -> weightless RMSNorm -> embed_audio projection.
// One row per 4 mel frames (40 ms). RMSNorm weights are used directly (no +1).
//
// HF runs the padded batch with masks and drops the padded rows at the end;
// every operator here only looks backwards in time or is masked against the
// padding, so running the valid frames alone gives the same valid rows.
// The float64 reference, which follows HF's blocked computation literally
// (padding, blocks, _rel_shift, masks), is reference_conformer_audio() in
// media/reference_towers.h.
#pragma once

#include <vector>

#include "io/media_embeddings.h"
#include "kernels/weight_matrix.h"
#include "media/layer_progress.h"
#include "media/audio_file.h"
#include "media/audio_log_mel.h"
#include "media/gemma4_vision_tower.h"

namespace splitdec {

struct ConformerAudioShape {
  int hidden = 1024, layers = 12, heads = 8;
  int channels0 = 128, channels1 = 32;  // subsampling_conv_channels
  int conv_kernel = 5;                  // the light conv's depthwise kernel
  int chunk = 12, context_left = 13;    // attention_chunk_size, attention_context_left (context_right 0)
  float logit_cap = 50.f;
  float invalid_logit = -1e9f;
  float residual_weight = 0.5f;
  float rms_norm_eps = 1e-6f;       // the light conv's norms, the subsampling LayerNorms, the embedder
  double gradient_clipping = 1e10;  // the clamps between blocks
  int output_proj_dims = 1536;
  int text_hidden = 0;
  LogMelShape features;

  int head_dim() const { return hidden / heads; }
  // Width of the flattened subsampled rows: the mel axis after two stride-2 convs, times channels1.
  int subsampled_bins() const { return (features.bins + 3) / 4; }
  int proj_input() const { return subsampled_bins() * channels1; }
  // Keys per query: HF's sliding window (context_left - 1, 0) allows distances 0 .. context_left - 2.
  int window() const { return context_left - 1; }
  // The sinusoid table: context_size / 2 + 1 rows, context_size = chunk + context_left - 1.
  int rel_positions() const { return (chunk + context_left - 1) / 2 + 1; }
};

struct ConformerFeedForward {
  std::vector<float> pre_norm, post_norm;  // [hidden]
  ClippedLinear up, down;                  // ffw_layer_1 [4 hidden, hidden], ffw_layer_2 [hidden, 4 hidden]
};

struct ConformerLayerWeights {
  ConformerFeedForward ffn1, ffn2;
  std::vector<float> norm_pre_attn, norm_post_attn, norm_out;  // [hidden]
  ClippedLinear q_proj, k_proj, v_proj, post;                  // [hidden, hidden]
  WeightMatrix relative_k_proj;                                // [hidden, hidden], not clipped
  std::vector<float> per_dim_scale;                            // [head_dim]
  std::vector<float> conv_pre_norm, conv_norm;                 // [hidden]
  ClippedLinear linear_start, linear_end;                      // [2 hidden, hidden], [hidden, hidden]
  std::vector<float> depthwise;                                // [hidden, 1, conv_kernel]
};

struct ConformerAudioWeights {
  std::vector<float> conv0;                 // [channels0, 1, 3, 3]
  WeightMatrix conv1;                       // [channels1, channels0 * 3 * 3], input index = (in channel, dt, dmel)
  std::vector<float> norm0, norm1;          // [channels0], [channels1]
  WeightMatrix input_proj;                  // [hidden, proj_input()], input index = mel * channels1 + channel
  std::vector<ConformerLayerWeights> layers;
  WeightMatrix output_proj;                 // [output_proj_dims, hidden]
  std::vector<float> output_bias;           // [output_proj_dims]
  WeightMatrix embedding_projection;        // [text_hidden, output_proj_dims]
};

// Soft tokens of a clip of `samples` 16 kHz samples: ceil(frames / 4) with
// frames = log_mel_frames(samples), what the processor inserts.
int64_t conformer_audio_tokens(const ConformerAudioShape& shape, int64_t samples);

// The clip's rows [conformer_audio_tokens, text_hidden]. A clip too short
// for one mel frame, or not at 16 kHz, is an InputError.
MediaEmbeddings conformer_audio_encode(const ConformerAudioShape& shape, const ConformerAudioWeights& weights,
                                       const AudioClip& clip, const LayerProgress& progress = {});

// The same from log-mel features [frames, bins] (tests, benches).
MediaEmbeddings conformer_audio_encode_features(const ConformerAudioShape& shape, const ConformerAudioWeights& weights,
                                                const std::vector<float>& features, int64_t frames,
                                                const LayerProgress& progress = {});

// Shape / weight consistency (ConfigError naming the tensor), shared with the reference.
void check_conformer_weights(const ConformerAudioShape& shape, const ConformerAudioWeights& weights);

}  // namespace splitdec
