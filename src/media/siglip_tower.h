// Gemma-3's vision frontend: the SigLIP-So400m tower and the multimodal
// projector (FRONTENDS.md section 1.3). Patches -> patch embedding (the
// Conv2d as a GEMM) + learned positions -> pre-LN encoder layers with
// bidirectional multi-head attention -> post LayerNorm -> pool x pool average
// pooling -> RMSNorm (1 + w) -> x @ mm_input_projection.
// The float64 reference is reference_siglip() in media/reference_towers.h.
#pragma once

#include <vector>

#include "io/media_embeddings.h"
#include "kernels/weight_matrix.h"
#include "media/layer_progress.h"
#include "media/image_patches.h"

namespace splitdec {

struct SiglipShape {
  int hidden = 1152, intermediate = 4304, layers = 27, heads = 16, head_dim = 72;
  int image_size = 896, patch = 14;
  int pool = 4;  // sqrt(patches / mm_tokens_per_image)
  float layer_norm_eps = 1e-6f;  // every LayerNorm and the projector's RMSNorm
  int text_hidden = 0;

  int grid() const { return image_size / patch; }
  int patch_dim() const { return 3 * patch * patch; }
  int tokens() const { return (grid() / pool) * (grid() / pool); }
};

struct SiglipLayerWeights {
  std::vector<float> ln1_weight, ln1_bias, ln2_weight, ln2_bias;  // [hidden]
  WeightMatrix q_proj, k_proj, v_proj, out_proj;                   // [hidden, hidden]
  std::vector<float> q_bias, k_bias, v_bias, out_bias;             // [hidden]
  WeightMatrix fc1, fc2;                                           // [intermediate, hidden], [hidden, intermediate]
  std::vector<float> fc1_bias, fc2_bias;
};

struct SiglipWeights {
  WeightMatrix patch_embedding;             // [hidden, 3 * patch * patch]: the OIHW conv weight, (c, ky, kx)
  std::vector<float> patch_bias;            // [hidden]
  std::vector<float> position_embedding;    // [grid * grid, hidden]
  std::vector<SiglipLayerWeights> layers;
  std::vector<float> post_ln_weight, post_ln_bias;  // [hidden]
  std::vector<float> soft_emb_norm;                 // [hidden], applied as (1 + w)
  // False when soft_emb_norm holds 1 + w already (llama.cpp's mmproj stores
  // it so): used as stored, rather than subtracting 1 and rounding.
  bool soft_emb_norm_adds_one = true;
  // The checkpoint stores mm_input_projection_weight as [hidden, text_hidden]
  // and uses it as x @ W; the loader transposes it to this nn.Linear layout.
  WeightMatrix projection;  // [text_hidden, hidden]
};

// patches: shape.grid() x shape.grid() patches of shape.patch_dim() values.
// Returns shape.tokens() rows of text_hidden.
MediaEmbeddings siglip_encode(const SiglipShape& shape, const SiglipWeights& weights, const ImagePatches& patches,
                              const LayerProgress& progress = {});

}  // namespace splitdec
