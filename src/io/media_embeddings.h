// Media embeddings (post-projector vectors, one row per soft token) from a
// .npy or .safetensors file, checked against the model's hidden size.
#pragma once

#include <string>
#include <vector>

namespace splitdec {

struct ModelConfig;

struct MediaEmbeddings {
  int64_t rows = 0;
  std::vector<float> data;  // [rows, hidden]
  // Gemma-3 pan-and-scan crops after the whole image: the rows are 1 + crops
  // equal blocks (the original, then each crop), each its own image in the prompt.
  int64_t crops = 0;
};

// .npy: float32 [n, hidden]. .safetensors: the file's one tensor (or the one
// named "embeddings"), F32 / BF16 / F16, [n, hidden] or [1, n, hidden].
// Errors are InputErrors naming the file, the shape or dtype found and the
// one expected.
MediaEmbeddings load_media_embeddings(const std::string& path, const ModelConfig& config);

}  // namespace splitdec
