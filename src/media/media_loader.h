// Any media a prompt names, to the rows the decoder reads: an embeddings
// file (.npy / .safetensors: post-projector rows, as before), an image
// (PNG / JPEG) through the model's vision frontend, or audio (WAV / FLAC)
// through its audio frontend. The file's first bytes decide, not its name,
// except that .npy / .safetensors names always mean embeddings.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "io/media_embeddings.h"
#include "media/encoded_media_cache.h"
#include "media/media_frontend.h"
#include "splitdec/modality.h"

namespace splitdec {

struct ModelConfig;

class MediaLoader {
 public:
  // Without a frontend only embeddings files load; images and audio files
  // are then an InputError that says so.
  explicit MediaLoader(const ModelConfig& config, std::shared_ptr<const MediaFrontend> frontend = nullptr,
                       ImageOptions image = {});
  // A loader that only counts: image and audio files give zero rows of the
  // right number (from the frontend's config; no weights needed), for
  // showing a prompt's ids without running the towers.
  static MediaLoader counting(const ModelConfig& config, std::shared_ptr<const MediaFrontend> frontend, ImageOptions image = {});

  // `kind`: the placeholder that named the file (Image, Video or Audio).
  MediaEmbeddings load_file(const std::string& path, Modality kind) const;
  // Bytes in memory (a server's data: URL); `name` is used in messages.
  MediaEmbeddings load_bytes(const std::string& bytes, const std::string& name, Modality kind) const;

  // The same loader, keeping what it encodes in `cache` and taking it from
  // there when the same bytes come again with the same options.
  MediaLoader with_cache(std::shared_ptr<EncodedMediaCache> cache) const {
    MediaLoader copy = *this;
    copy.cache_ = std::move(cache);
    return copy;
  }

  const ModelConfig& config() const { return *config_; }
  const MediaFrontend* frontend() const { return frontend_.get(); }
  const ImageOptions& image_options() const { return image_; }
  // The same loader, telling `progress` (file or data name, layers done,
  // layers in all) how each image or audio tower pass goes.
  MediaLoader with_progress(std::function<void(const std::string& name, int done, int total)> progress) const {
    MediaLoader copy = *this;
    copy.progress_ = std::move(progress);
    return copy;
  }
  // The same loader with other image options (a server request's image_tokens).
  MediaLoader with_image_options(const ImageOptions& image) const {
    MediaLoader copy = *this;
    copy.image_ = image;
    return copy;
  }

 private:
  // Throws, naming `name` and the reason, unless the frontend for it is loaded.
  void require(bool audio, const std::string& name) const;
  // `name`: the file or data the media came from, for progress.
  MediaEmbeddings encode_image(const RgbImage& image, const std::string& name) const;
  MediaEmbeddings encode_audio(const AudioClip& clip, const std::string& name) const;
  LayerProgress progress_for(const std::string& name) const;
  MediaEmbeddings load_bytes_uncached(const std::string& bytes, const std::string& name, Modality kind) const;
  // load_file past the cache: what load_bytes_uncached's temporary file goes
  // through (through load_file it would come back to the cache, miss, and
  // write another temporary file, without end).
  // `name`: what messages and progress call it (the temporary file's source).
  MediaEmbeddings load_file_uncached(const std::string& path, Modality kind, const std::string& name) const;
  std::string cache_key(const std::string& bytes, Modality kind) const;
  const ModelConfig* config_;
  std::shared_ptr<const MediaFrontend> frontend_;
  ImageOptions image_;
  bool count_only_ = false;
  std::shared_ptr<EncodedMediaCache> cache_;  // null: none
  std::function<void(const std::string&, int, int)> progress_;  // empty: none
};

}  // namespace splitdec
