#include "media/media_loader.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/model_config.h"
#include "media/audio_file.h"
#include "media/image_file.h"

namespace splitdec {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_embeddings_name(const std::string& path) { return ends_with(path, ".npy") || ends_with(path, ".safetensors"); }

std::string read_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open");
  std::string head(n, '\0');
  in.read(head.data(), std::streamsize(n));
  head.resize(size_t(in.gcount()));
  return head;
}

const char* kind_name(Modality kind) { return kind == Modality::Audio ? "audio" : "image"; }

// A safetensors file has no magic: an 8-byte header length, then the JSON header.
bool looks_like_safetensors(const std::string& bytes) { return bytes.size() > 8 && bytes[8] == '{'; }

// Bytes that are no format this loader reads: said as a failed decode, with
// what they look like and what is accepted.
[[noreturn]] void undecodable(const std::string& bytes, const std::string& name, Modality kind) {
  const std::string found = describe_other_format(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (kind == Modality::Audio)
    throw InputError(name + ": could not be decoded as audio: not WAV or FLAC (found " + found +
                     "); audio is WAV or FLAC, or post-projector embeddings (.npy, .safetensors)");
  throw InputError(name + ": could not be decoded as an image: not PNG or JPEG (found " + found +
                   "); images are PNG or JPEG, or post-projector embeddings (.npy, .safetensors)");
}

}  // namespace

MediaLoader::MediaLoader(const ModelConfig& config, std::shared_ptr<const MediaFrontend> frontend, ImageOptions image)
    : config_(&config), frontend_(std::move(frontend)), image_(image) {
  // Refused up front, before any file is read (encode_image would too).
  if (image_.pan_and_scan && frontend_ && frontend_->config().vision != VisionFrontend::Siglip &&
      frontend_->config().vision != VisionFrontend::None)
    throw InputError("--pan-and-scan is a Gemma-3 (SigLIP) option; this model's vision frontend sizes images by "
                     "--image-tokens instead");
}

MediaLoader MediaLoader::counting(const ModelConfig& config, std::shared_ptr<const MediaFrontend> frontend,
                                  ImageOptions image) {
  MediaLoader m(config, std::move(frontend), image);
  m.count_only_ = true;
  return m;
}

LayerProgress MediaLoader::progress_for(const std::string& name) const {
  if (!progress_) return {};
  return [progress = progress_, name](int done, int total) { progress(name, done, total); };
}

MediaEmbeddings MediaLoader::encode_image(const RgbImage& image, const std::string& name) const {
  if (!count_only_) return frontend_->encode_image(image, image_, progress_for(name));
  const int64_t rows = frontend_->count_image_tokens(image, image_);
  return MediaEmbeddings{rows, std::vector<float>(size_t(rows) * size_t(config_->hidden_size)),
                         frontend_->count_image_crops(image, image_)};
}

MediaEmbeddings MediaLoader::encode_audio(const AudioClip& clip, const std::string& name) const {
  if (!count_only_) return frontend_->encode_audio(clip, progress_for(name));
  const int64_t rows = frontend_->count_audio_tokens(clip);
  return MediaEmbeddings{rows, std::vector<float>(size_t(rows) * size_t(config_->hidden_size))};
}

void MediaLoader::require(bool audio, const std::string& name) const {
  if (frontend_ && (audio ? frontend_->has_audio() : frontend_->has_vision())) return;
  // Counting needs only the config's frontend, not its weights.
  if (frontend_ && count_only_ &&
      (audio ? frontend_->config().audio != AudioFrontend::None : frontend_->config().vision != VisionFrontend::None))
    return;
  if (frontend_)
    throw InputError(name + ": " + (audio ? frontend_->why_no_audio() : frontend_->why_no_vision()) +
                     "; pass post-projector embeddings (.npy / .safetensors) instead");
  throw InputError(name + ": " + (audio ? "an audio" : "an image") +
                   " file, but no media frontend is loaded; pass post-projector embeddings (.npy / .safetensors)");
}

// Files a cache reads whole to key them: larger ones are encoded uncached.
constexpr std::uintmax_t kMaxCachedFileBytes = 64 << 20;

MediaEmbeddings MediaLoader::load_file(const std::string& path, Modality kind) const {
  if (is_embeddings_name(path)) return load_media_embeddings(path, *config_);
  if (cache_ && !count_only_) {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size <= kMaxCachedFileBytes) {
      std::ifstream in(path, std::ios::binary);
      std::string bytes(size_t(size), '\0');
      if (in.read(bytes.data(), std::streamsize(size)) && in.gcount() == std::streamsize(size)) return load_bytes(bytes, path, kind);
    }
  }
  return load_file_uncached(path, kind, path);
}

MediaEmbeddings MediaLoader::load_file_uncached(const std::string& path, Modality kind, const std::string& name) const {
  if (is_embeddings_name(path)) return load_media_embeddings(path, *config_);
  const std::string head = read_head(path, 16);
  const auto* bytes = reinterpret_cast<const uint8_t*>(head.data());
  if (looks_like_image(bytes, head.size())) {
    if (kind == Modality::Audio) throw InputError(path + ": an image file given as audio");
    require(false, path);
    return encode_image(read_image_file(path, image_.max_pixels), name);
  }
  if (looks_like_audio(reinterpret_cast<const unsigned char*>(head.data()), head.size())) {
    if (kind != Modality::Audio) throw InputError(path + ": an audio file given as an " + std::string(kind_name(kind)));
    require(true, path);
    return encode_audio(read_audio_file(path), name);
  }
  if (head.rfind("\x93NUMPY", 0) == 0) return load_media_embeddings(path, *config_);
  throw InputError(path + ": not a media file splitdec reads (" + std::string(kind_name(kind)) +
                   "s: PNG, JPEG" + (kind == Modality::Audio ? ", WAV, FLAC" : "") +
                   "; or embeddings: .npy, .safetensors)");
}

std::string MediaLoader::cache_key(const std::string& bytes, Modality kind) const {
  // Everything the rows depend on besides the model: the placeholder's kind
  // and the image options (max_pixels only refuses, it never changes rows).
  return std::to_string(int(kind)) + "/" + std::to_string(image_.image_tokens) + "/" + (image_.pan_and_scan ? "pan" : "whole") +
         "/" + bytes;
}

MediaEmbeddings MediaLoader::load_bytes(const std::string& bytes, const std::string& name, Modality kind) const {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const bool encoded = looks_like_image(data, bytes.size()) ||
                       looks_like_audio(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  if (!cache_ || count_only_ || !encoded) return load_bytes_uncached(bytes, name, kind);
  const std::string key = cache_key(bytes, kind);
  if (std::optional<MediaEmbeddings> hit = cache_->find(key)) return std::move(*hit);
  MediaEmbeddings rows = load_bytes_uncached(bytes, name, kind);
  cache_->insert(key, rows);
  return rows;
}

MediaEmbeddings MediaLoader::load_bytes_uncached(const std::string& bytes, const std::string& name, Modality kind) const {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (looks_like_image(data, bytes.size())) {
    if (kind == Modality::Audio) throw InputError(name + ": an image given as audio");
    require(false, name);
    return encode_image(decode_image(data, bytes.size(), name, image_.max_pixels), name);
  }
  // Audio and embeddings are read from files: through a private temporary
  // file, removed before returning.
  const bool npy = bytes.rfind("\x93NUMPY", 0) == 0;
  const bool audio = looks_like_audio(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  if (!npy && !audio && !looks_like_safetensors(bytes)) undecodable(bytes, name, kind);
  const char* suffix = npy ? ".npy" : audio ? ".audio" : ".safetensors";
  std::string path = (std::filesystem::temp_directory_path() / "splitdec-media-XXXXXX").string() + suffix;
  const int fd = mkstemps(path.data(), int(std::strlen(suffix)));
  if (fd < 0) throw std::runtime_error("cannot create a temporary file for inline media");
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) break;
    written += size_t(n);
  }
  ::close(fd);
  if (written != bytes.size()) throw std::runtime_error("cannot write inline media to a temporary file");
  try {
    return load_file_uncached(path, kind, name);
  } catch (const Error& e) {
    // The messages name the temporary file; the caller knows the source by `name`.
    std::string what = e.what();
    for (size_t at = what.find(path); at != std::string::npos; at = what.find(path)) what.replace(at, path.size(), name);
    throw InputError(what);
  }
}

}  // namespace splitdec
