#include "media/media_frontend.h"

#include <cstdio>
#include <set>

#include "core/error.h"
#include "io/families/mmproj.h"
#include "io/gguf.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "media/image_patches.h"

namespace splitdec {

std::shared_ptr<const MediaFrontend> MediaFrontend::load(const std::string& model_dir, const ModelConfig& decoder,
                                                         const TensorStore& store) {
  FrontendConfig config = load_frontend_config(model_dir, decoder);
  FrontendWeights weights;
  size_t bytes = 0;
  // False for a decoder-only checkpoint of a multimodal model: the
  // frontends are declared but absent, so media must come as embeddings files.
  const bool ready = load_frontend_weights(config, store, weights, &bytes);
  return std::make_shared<const MediaFrontend>(std::move(config), std::move(weights), ready, bytes);
}

std::shared_ptr<const MediaFrontend> MediaFrontend::load_mmproj(const std::string& model_path, const std::string& mmproj,
                                                                const ModelConfig& decoder) {
  FrontendConfig config = load_frontend_config(model_path, decoder, mmproj);
  if (config.vision == VisionFrontend::None && config.audio == AudioFrontend::None)
    throw ConfigError(mmproj + ": holds no media tower this model can use");
  FrontendWeights weights;
  size_t bytes = 0;
  const TensorStore store = TensorStore::open_mmproj(mmproj);
  // Every tensor the config asks for, by the file's names, and nothing else:
  // a tensor left over means the keys and the tensors disagree.
  std::string layers;  // what the keys say, for the messages
  const int vision_layers = config.vision == VisionFrontend::Siglip          ? config.siglip.layers
                            : config.vision == VisionFrontend::Gemma4Encoder ? config.gemma4.layers
                                                                             : -1;
  if (vision_layers >= 0) layers = "clip.vision.block_count says " + std::to_string(vision_layers) + " layers";
  if (config.audio == AudioFrontend::Conformer)
    layers += (layers.empty() ? "" : ", ") + std::string("clip.audio.block_count says ") + std::to_string(config.conformer.layers) + " layers";
  std::set<std::string> wanted;
  for (const FrontendTensor& t : frontend_tensors(config, weights)) {
    wanted.insert(t.name);
    if (!store.find(t.name))
      throw FormatError(mmproj + ": tensor '" + mmproj_name_in(*GgufFile::open(mmproj), t.name) + "' is missing (" + layers + ")");
  }
  for (const auto& [name, view] : store.tensors())
    if (!wanted.count(name))
      throw FormatError(mmproj + ": tensor '" + view.name + "' is not part of the tower the metadata describes (" + layers + ")");
  weights = FrontendWeights{};
  if (!load_frontend_weights(config, store, weights, &bytes))
    throw FormatError(mmproj + ": none of the towers' tensors are in the file");
  weights.siglip.soft_emb_norm_adds_one = false;  // the converter stored 1 + w
  return std::make_shared<const MediaFrontend>(std::move(config), std::move(weights), true, bytes);
}

MediaFrontend::MediaFrontend(FrontendConfig config, FrontendWeights weights, bool weights_loaded, size_t bytes)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      vision_ready_(weights_loaded && config_.vision != VisionFrontend::None),
      audio_ready_(weights_loaded && config_.audio != AudioFrontend::None),
      bytes_(bytes) {}

std::string MediaFrontend::describe() const {
  std::string s;
  if (!vision_ready_ && !audio_ready_) return "no media frontend (media come as embeddings files)";
  switch (config_.vision) {
    case VisionFrontend::None: s = "no vision frontend"; break;
    case VisionFrontend::Siglip: s = "SigLIP vision tower (" + std::to_string(config_.siglip.layers) + " layers)"; break;
    case VisionFrontend::Gemma4Encoder:
      s = "Gemma-4 vision encoder (" + std::to_string(config_.gemma4.layers) + " layers)";
      break;
    case VisionFrontend::UnifiedPatches: s = "gemma4_unified patch embedder"; break;
  }
  if (audio_ready_ && config_.audio == AudioFrontend::RawFrames) s += ", raw-frame audio embedder";
  if (audio_ready_ && config_.audio == AudioFrontend::Conformer)
    s += ", conformer audio tower (" + std::to_string(config_.conformer.layers) + " layers)";
  if (bytes_ > 0) s += ", " + std::to_string((bytes_ + (1 << 19)) >> 20) + " MiB";
  return s;
}

std::string MediaFrontend::why_no_vision() const {
  if (vision_ready_) return "";
  if (!config_.vision_missing.empty()) return config_.vision_missing;
  return config_.vision == VisionFrontend::None ? "this model has no vision frontend (config.json has no vision_config)"
                                                : "this model's vision frontend weights are not in the checkpoint";
}

std::string MediaFrontend::why_no_audio() const {
  if (audio_ready_) return "";
  if (!config_.audio_unsupported.empty()) return config_.audio_unsupported;
  return config_.audio == AudioFrontend::None ? "this model has no audio frontend (config.json has no audio_config)"
                                              : "this model's audio frontend weights are not in the checkpoint";
}

namespace {

int image_budget(const FrontendConfig& c, const ImageOptions& o) {
  const int t = o.image_tokens == 0 ? c.default_image_tokens : o.image_tokens;
  if (!is_gemma4_image_budget(t))
    throw InputError("--image-tokens " + std::to_string(t) + " is not a Gemma-4 budget (70, 140, 280, 560, 1120 are)");
  return t;
}

// Gemma-3's image size is fixed: a budget other than its own is a mistake.
void check_siglip_tokens(const FrontendConfig& c, const ImageOptions& o) {
  if (o.image_tokens != 0 && o.image_tokens != c.siglip.tokens())
    throw InputError("--image-tokens " + std::to_string(o.image_tokens) + ": Gemma-3 images are always " +
                     std::to_string(c.siglip.tokens()) + " tokens");
}

// Pan-and-scan is a Gemma-3 (SigLIP) processor option; Gemma-4 sizes images by budget instead.
void check_pan_and_scan(const FrontendConfig& c, const ImageOptions& o) {
  if (o.pan_and_scan && c.vision != VisionFrontend::Siglip)
    throw InputError(std::string("--pan-and-scan is a Gemma-3 (SigLIP) option; this model's vision frontend ") +
                     (c.vision == VisionFrontend::None ? "is absent" : "sizes images by --image-tokens instead"));
}

}  // namespace

MediaEmbeddings MediaFrontend::encode_image(const RgbImage& image, const ImageOptions& options, const LayerProgress& progress) const {
  if (!vision_ready_) throw InputError(why_no_vision() + ": pass images as embeddings files (.npy / .safetensors)");
  check_pan_and_scan(config_, options);
  switch (config_.vision) {
    case VisionFrontend::Siglip: {
      check_siglip_tokens(config_, options);
      auto encode = [&](const RgbImage& img) {
        return siglip_encode(config_.siglip, weights_.siglip,
                             siglip_patches(img, config_.siglip.image_size, config_.siglip.patch), progress);
      };
      MediaEmbeddings out = encode(image);
      if (!options.pan_and_scan) return out;
      // HF's order: the whole image, then each crop, each resized alone.
      for (const RgbImage& crop : pan_and_scan_crops(image)) {
        const MediaEmbeddings c = encode(crop);
        out.data.insert(out.data.end(), c.data.begin(), c.data.end());
        out.rows += c.rows;
        ++out.crops;
      }
      return out;
    }
    case VisionFrontend::Gemma4Encoder:
      return gemma4_vision_encode(
          config_.gemma4, weights_.gemma4,
          gemma4_patches(image, image_budget(config_, options), config_.gemma4_patch, config_.gemma4_pool, false), progress);
    case VisionFrontend::UnifiedPatches:
      return unified_image_encode(
          config_.unified, weights_.unified,
          gemma4_patches(image, image_budget(config_, options), config_.gemma4_patch, config_.gemma4_pool, true));
    case VisionFrontend::None: break;
  }
  throw InputError("this model has no vision frontend");
}

int64_t MediaFrontend::count_image_tokens(const RgbImage& image, const ImageOptions& options) const {
  check_pan_and_scan(config_, options);
  switch (config_.vision) {
    case VisionFrontend::Siglip:
      check_siglip_tokens(config_, options);
      return (1 + count_image_crops(image, options)) * config_.siglip.tokens();
    case VisionFrontend::Gemma4Encoder:
    case VisionFrontend::UnifiedPatches: {
      const int side = config_.gemma4_patch * config_.gemma4_pool;
      const ImageSize t = gemma4_target_size(image.width, image.height, image_budget(config_, options),
                                             config_.gemma4_patch, config_.gemma4_pool);
      return int64_t(t.width / side) * int64_t(t.height / side);
    }
    case VisionFrontend::None: break;
  }
  throw InputError(why_no_vision());
}

int64_t MediaFrontend::count_image_crops(const RgbImage& image, const ImageOptions& options) const {
  check_pan_and_scan(config_, options);
  if (!options.pan_and_scan) return 0;
  return int64_t(pan_and_scan_boxes(image.width, image.height).size());
}

void MediaFrontend::check_image_options(const ImageOptions& options) const {
  check_pan_and_scan(config_, options);
  if (config_.vision == VisionFrontend::Siglip) check_siglip_tokens(config_, options);
  else if (config_.vision != VisionFrontend::None) image_budget(config_, options);
  else if (options.image_tokens != 0) throw InputError("--image-tokens: " + why_no_vision());
}

namespace {

// Gemma-4's processor: ceil(frames / 4) tokens (processing_gemma4.py's
// replace_audio_token), for clips of at least one mel frame and at most 30 s.
// HF's feature extractor would silently cut a longer clip to 30 s; here it
// is refused, so that no audio is dropped unseen.
std::string seconds(int64_t samples) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", double(samples) / kAudioSampleRate);
  return text;
}

int64_t conformer_tokens_checked(const FrontendConfig& c, const AudioClip& clip) {
  const int64_t n = int64_t(clip.samples.size());
  if (n > kGemma4MaxAudioSamples)
    throw InputError("the audio clip is " + seconds(n) + " s long (" + std::to_string(n) + " samples); Gemma-4's audio processor takes at most 30 s (" +
                     std::to_string(kGemma4MaxAudioSamples) + " samples at 16 kHz, " +
                     std::to_string(conformer_audio_tokens(c.conformer, kGemma4MaxAudioSamples)) + " audio tokens): split it");
  const int64_t tokens = conformer_audio_tokens(c.conformer, n);
  if (tokens == 0)
    throw InputError("the audio clip has " + std::to_string(n) + " samples; Gemma-4's audio tower needs at least " +
                     std::to_string(c.conformer.features.frame_length - c.conformer.features.frame_length / 2 + 1) +
                     " (one 20 ms mel frame, about 10 ms of audio at 16 kHz)");
  return tokens;
}

}  // namespace

int64_t MediaFrontend::count_audio_tokens(const AudioClip& clip) const {
  if (config_.audio == AudioFrontend::None) throw InputError(why_no_audio());
  if (clip.samples.empty()) throw InputError("the audio clip is empty");
  if (config_.audio == AudioFrontend::Conformer) return conformer_tokens_checked(config_, clip);
  const int64_t frame = config_.audio_shape.frame;
  return (int64_t(clip.samples.size()) + frame - 1) / frame;
}

MediaEmbeddings MediaFrontend::encode_audio(const AudioClip& clip, const LayerProgress& progress) const {
  if (!audio_ready_) throw InputError(why_no_audio() + ": pass audio as an embeddings file (.npy / .safetensors)");
  if (config_.audio == AudioFrontend::Conformer) {
    if (clip.samples.empty()) throw InputError("the audio clip is empty");
    conformer_tokens_checked(config_, clip);
    return conformer_audio_encode(config_.conformer, weights_.conformer, clip, progress);
  }
  return unified_audio_encode(config_.audio_shape, weights_.audio_projection, clip);
}

}  // namespace splitdec
