// A model's media frontends, loaded once beside the decoder: images (PNG /
// JPEG, decoded to RGB) and audio (16 kHz mono) to the post-projector rows
// the decoder reads in place of a media block's soft tokens. What a model
// has comes from its config.json and checkpoint (frontend_config.h); a
// request for what it lacks is an InputError that says so.
#pragma once

#include <memory>
#include <string>

#include "io/media_embeddings.h"
#include "media/audio_file.h"
#include "media/frontend_config.h"
#include "media/frontend_weights.h"
#include "media/layer_progress.h"
#include "media/rgb_image.h"

namespace splitdec {

class TensorStore;

struct ImageOptions {
  int image_tokens = 0;  // Gemma-4 soft-token budget (70, 140, 280, 560, 1120); 0: the model's default
  bool pan_and_scan = false;  // Gemma-3 (SigLIP) only: the original image, then its pan-and-scan crops
  int64_t max_pixels = 0;     // images with more pixels are refused before decoding; 0: kMaxImagePixels
};

class MediaFrontend {
 public:
  // config.json (+ preprocessor_config.json) of `model_dir` and the tower
  // weights in `store`. A model without frontends gives an empty one.
  static std::shared_ptr<const MediaFrontend> load(const std::string& model_dir, const ModelConfig& decoder,
                                                   const TensorStore& store);
  // The vision tower of an mmproj GGUF beside the text GGUF `model_path`
  // (io/families/gemma3_mmproj.h); every tensor must be there.
  static std::shared_ptr<const MediaFrontend> load_mmproj(const std::string& model_path, const std::string& mmproj,
                                                          const ModelConfig& decoder);
  MediaFrontend(FrontendConfig config, FrontendWeights weights, bool weights_loaded, size_t bytes);

  bool has_vision() const { return vision_ready_; }
  bool has_audio() const { return audio_ready_; }
  const FrontendConfig& config() const { return config_; }
  size_t bytes() const { return bytes_; }
  std::string describe() const;  // one line: which frontends, their size
  // Why an image / audio cannot be encoded (empty when it can).
  std::string why_no_vision() const;
  std::string why_no_audio() const;

  // The image's rows: shape [tokens, text_hidden]; with pan_and_scan the
  // original's rows, then each crop's (`crops` says how many). Errors name
  // the limit (budget, position table). `progress` hears each tower pass
  // (with pan-and-scan one per crop).
  MediaEmbeddings encode_image(const RgbImage& image, const ImageOptions& options = {}, const LayerProgress& progress = {}) const;
  MediaEmbeddings encode_audio(const AudioClip& clip, const LayerProgress& progress = {}) const;

  // How many soft tokens an image / a clip becomes, from the config alone
  // (no weights needed): what `tokenize` shows without loading the towers.
  int64_t count_image_tokens(const RgbImage& image, const ImageOptions& options = {}) const;
  // How many pan-and-scan crops the image gives (0 unless options.pan_and_scan).
  int64_t count_image_crops(const RgbImage& image, const ImageOptions& options = {}) const;
  int64_t count_audio_tokens(const AudioClip& clip) const;
  // Throws what encode_image would for these options on any image (a budget
  // the model cannot take, pan-and-scan off Gemma-3): for checking a
  // server's defaults at startup.
  void check_image_options(const ImageOptions& options) const;

 private:
  FrontendConfig config_;
  FrontendWeights weights_;
  bool vision_ready_ = false, audio_ready_ = false;
  size_t bytes_ = 0;
};

}  // namespace splitdec
