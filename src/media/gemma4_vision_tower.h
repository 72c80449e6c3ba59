// The vision encoder of Gemma-4 E2B/E4B/26B/31B (FRONTENDS.md section 2.3):
// 2 (x - 0.5) -> input projection + a row of the 2-D position table per axis
// -> layers with sandwich RMSNorms (w used directly), q/k norms, 2-D RoPE
// (first half of head_dim rotated by x, second by y), weightless v norm,
// attention scale 1, gated tanh-GELU MLP, clipped linears where the
// checkpoint has them -> pool x pool average pooling by position -> x
// sqrt(hidden) -> standardize (large models) -> weightless RMSNorm ->
// embedding projection.
// The float64 reference is reference_gemma4_vision() in media/reference_towers.h.
#pragma once

#include <optional>
#include <vector>

#include "io/media_embeddings.h"
#include "kernels/weight_matrix.h"
#include "media/layer_progress.h"
#include "media/clipped_linear.h"
#include "media/image_patches.h"

namespace splitdec {

struct Gemma4VisionShape {
  int hidden = 768, intermediate = 3072, layers = 16, heads = 12, kv_heads = 12, head_dim = 64;
  int patch = 16, pool = 3;
  int positions = 10240;  // rows of each axis of the position table
  float rms_norm_eps = 1e-6f;
  double rope_theta = 100.0;
  bool standardize = false;
  int text_hidden = 0;

  int patch_dim() const { return 3 * patch * patch; }
};


struct Gemma4VisionLayerWeights {
  ClippedLinear q_proj, k_proj, v_proj, o_proj;
  std::vector<float> q_norm, k_norm;  // [head_dim]
  std::vector<float> input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;  // [hidden]
  ClippedLinear gate_proj, up_proj, down_proj;
};

struct Gemma4VisionWeights {
  WeightMatrix input_proj;             // [hidden, 3 * patch * patch], (y, x, c) order
  std::vector<float> position_table;   // [2, positions, hidden]: axis 0 by x (column), axis 1 by y (row)
  std::vector<Gemma4VisionLayerWeights> layers;
  std::vector<float> std_bias, std_scale;  // [hidden] when shape.standardize
  WeightMatrix embedding_projection;       // [text_hidden, hidden]
};

// patches: rows x cols patches of patch_dim() values, each side a multiple
// of shape.pool. Returns (rows / pool) * (cols / pool) rows of text_hidden.
MediaEmbeddings gemma4_vision_encode(const Gemma4VisionShape& shape, const Gemma4VisionWeights& weights,
                                     const ImagePatches& patches, const LayerProgress& progress = {});

}  // namespace splitdec
