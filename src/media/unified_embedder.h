// gemma4_unified's encoder-free frontends (FRONTENDS.md section 3.3).
// Image: each 48 px patch -> LayerNorm (eps 1e-5) -> dense + bias ->
// LayerNorm -> + pos[x, 0] + pos[y, 1] -> LayerNorm -> RMSNorm without weight
// -> embedding projection. No attention.
// Audio: frames of 640 raw samples -> RMSNorm without weight -> projection.
// The float64 references are in media/reference_towers.h.
#pragma once

#include <vector>

#include "io/media_embeddings.h"
#include "kernels/weight_matrix.h"
#include "media/audio_file.h"
#include "media/image_patches.h"

namespace splitdec {

struct UnifiedVisionShape {
  int patch = 48;             // model_patch_size: patch_size * pooling_kernel_size
  int embed_dim = 3840;       // mm_embed_dim
  int positions = 1120;       // mm_posemb_size: rows of the position table
  float layer_norm_eps = 1e-5f;
  float rms_norm_eps = 1e-6f;
  int text_hidden = 0;

  int patch_dim() const { return 3 * patch * patch; }
};

struct UnifiedVisionWeights {
  std::vector<float> ln1_weight, ln1_bias;   // [patch_dim]
  WeightMatrix dense;                        // [embed_dim, patch_dim]
  std::vector<float> dense_bias;             // [embed_dim]
  std::vector<float> ln2_weight, ln2_bias;   // [embed_dim]
  std::vector<float> pos_embedding;          // [positions, 2, embed_dim]
  std::vector<float> pos_norm_weight, pos_norm_bias;  // [embed_dim]
  WeightMatrix projection;                   // [text_hidden, embed_dim]
};

// patches: merged (48 px) patches. Returns rows * cols rows of text_hidden.
MediaEmbeddings unified_image_encode(const UnifiedVisionShape& shape, const UnifiedVisionWeights& weights,
                                     const ImagePatches& patches);

struct UnifiedAudioShape {
  int frame = 640;  // audio_embed_dim: raw samples per soft token
  float rms_norm_eps = 1e-6f;
  int text_hidden = 0;
};

// Frames of `frame` samples, the last zero-padded: ceil(samples / frame)
// rows of text_hidden. An empty clip is an InputError.
MediaEmbeddings unified_audio_encode(const UnifiedAudioShape& shape, const WeightMatrix& projection,
                                     const AudioClip& clip);

}  // namespace splitdec
