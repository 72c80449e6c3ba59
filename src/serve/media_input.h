// Media content parts -> embedding rows. Today the model takes precomputed
// post-projector embeddings (.npy / .safetensors, io/media_embeddings.h):
// they come inline as a base64 data: URL or as a file under the operator's
// --media-dir. Real image decoding (JPEG/PNG -> vision tower) is a later issue.
#pragma once

#include <string>

#include "io/media_embeddings.h"

namespace splitdec {
struct ModelConfig;
}

namespace splitdec::serve {

// "data:<mime>;base64,<payload>" holding an .npy (float32 [n, hidden]) or a
// .safetensors file. `param` names the field in errors (ApiError 400).
MediaEmbeddings media_from_data_url(const std::string& url, const ModelConfig& config, const std::string& param);

// A file under `media_dir` (relative to it, or absolute but inside it after
// symlinks are resolved). Empty `media_dir`: refused.
MediaEmbeddings media_from_path(const std::string& path, const std::string& media_dir, const ModelConfig& config,
                                const std::string& param);

}  // namespace splitdec::serve
