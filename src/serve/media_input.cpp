#include "serve/media_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/base64.h"

namespace splitdec::serve {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The loader reads files; the payload goes through a private temp file that
// is removed before returning.
MediaEmbeddings load_bytes(const std::string& bytes, const char* suffix, const ModelConfig& c, const std::string& param) {
  std::string path = (fs::temp_directory_path() / "splitdec-media-XXXXXX").string() + suffix;
  const int fd = mkstemps(path.data(), int(std::char_traits<char>::length(suffix)));
  if (fd < 0) throw std::runtime_error("cannot create a temporary file for inline media");
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) break;
    written += size_t(n);
  }
  ::close(fd);
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  if (written != bytes.size()) throw std::runtime_error("cannot write inline media to a temporary file");
  try {
    return load_media_embeddings(path, c);
  } catch (const Error& e) {
    // The loader names the temp file; the client knows its field instead.
    std::string what = e.what();
    if (starts_with(what, path)) what = what.substr(path.size());
    throw bad_field(param, param + ": not a usable embeddings payload" + what);
  }
}

}  // namespace

MediaEmbeddings media_from_data_url(const std::string& url, const ModelConfig& c, const std::string& param) {
  if (!starts_with(url, "data:")) {
    if (starts_with(url, "http://") || starts_with(url, "https://"))
      throw bad_field(param, param + ": remote URLs are not fetched; send the media inline as a data: URL");
    throw bad_field(param, param + ": expected a data: URL (data:application/octet-stream;base64,...)");
  }
  const size_t comma = url.find(',');
  if (comma == std::string::npos) throw bad_field(param, param + ": a data: URL needs a ',' before its payload");
  const std::string header = url.substr(5, comma - 5);
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0)
    throw bad_field(param, param + ": only base64 data: URLs are accepted (data:<type>;base64,...)");
  const std::string mime = header.substr(0, header.size() - 7);
  if (starts_with(mime, "image/") || starts_with(mime, "audio/"))
    throw bad_field(param, param + ": " + mime +
                               " is not decoded yet; send post-projector embeddings (.npy float32 [n, hidden] or .safetensors) "
                               "as data:application/octet-stream;base64,...");
  const std::optional<std::string> bytes = base64_decode(std::string_view(url).substr(comma + 1));
  if (!bytes) throw bad_field(param, param + ": the data: URL's payload is not valid base64");
  if (bytes->empty()) throw bad_field(param, param + ": the data: URL's payload is empty");
  // .npy files start with \x93NUMPY; anything else is read as safetensors.
  const bool npy = starts_with(*bytes, "\x93NUMPY");
  return load_bytes(*bytes, npy ? ".npy" : ".safetensors", c, param);
}

MediaEmbeddings media_from_path(const std::string& path, const std::string& media_dir, const ModelConfig& c,
                                const std::string& param) {
  if (media_dir.empty())
    throw ApiError(400, param + ": file paths are refused; the server was started without --media-dir", param, "media_dir_not_set");
  std::error_code ec;
  const fs::path root = fs::canonical(media_dir, ec);
  if (ec) throw std::runtime_error("--media-dir " + media_dir + " is not readable: " + ec.message());
  const fs::path file = fs::weakly_canonical(fs::path(path).is_absolute() ? fs::path(path) : root / path, ec);
  const std::string r = root.string() + "/";
  if (ec || !starts_with(file.string(), r))
    throw bad_field(param, param + ": '" + path + "' is outside the server's media directory");
  if (!fs::is_regular_file(file, ec)) throw bad_field(param, param + ": '" + path + "' is not a file in the media directory");
  try {
    return load_media_embeddings(file.string(), c);
  } catch (const Error& e) {
    throw bad_field(param, param + ": " + e.what());
  }
}

}  // namespace splitdec::serve
