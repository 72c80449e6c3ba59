// Media content parts -> embedding rows: images (PNG / JPEG) and audio (WAV /
// FLAC) through the model's frontends, or precomputed post-projector
// embeddings (.npy / .safetensors); inline as a base64 data: URL or as a file
// under the operator's --media-dir.
#pragma once

#include <string>

#include "io/media_embeddings.h"
#include "media/media_loader.h"

namespace splitdec::serve {

// "data:<mime>;base64,<payload>" holding an image, an audio file, an .npy
// (float32 [n, hidden]) or a .safetensors file; the payload's bytes decide.
// `param` names the field in errors (ApiError 400).
MediaEmbeddings media_from_data_url(const std::string& url, const MediaLoader& media, Modality kind,
                                    const std::string& param);

// A file under `media_dir` (relative to it, or absolute but inside it after
// symlinks are resolved). Empty `media_dir`: refused.
MediaEmbeddings media_from_path(const std::string& path, const std::string& media_dir, const MediaLoader& media,
                                Modality kind, const std::string& param);

}  // namespace splitdec::serve
