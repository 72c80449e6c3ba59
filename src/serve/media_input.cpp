#include "serve/media_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "serve/api_error.h"
#include "core/base64.h"

namespace splitdec::serve {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

MediaEmbeddings media_from_data_url(const std::string& url, const MediaLoader& media, Modality kind,
                                    const std::string& param) {
  if (!starts_with(url, "data:")) {
    if (starts_with(url, "http://") || starts_with(url, "https://"))
      throw bad_field(param, param + ": remote URLs are not fetched; send the media inline as a data: URL");
    throw bad_field(param, param + ": expected a data: URL (data:application/octet-stream;base64,...)");
  }
  std::string bytes;
  try {
    bytes = decode_data_url(url);
  } catch (const InputError& e) {
    throw bad_field(param, param + ": " + e.what());
  }
  try {
    return media.load_bytes(bytes, param, kind);
  } catch (const Error& e) {
    throw bad_field(param, e.what());
  }
}

MediaEmbeddings media_from_path(const std::string& path, const std::string& media_dir, const MediaLoader& media,
                                Modality kind, const std::string& param) {
  if (media_dir.empty())
    throw ApiError(400, param + ": file paths are refused; the server was started without --media-dir", param, "media_dir_not_set");
  std::error_code ec;
  const fs::path root = fs::canonical(media_dir, ec);
  if (ec) throw std::runtime_error("--media-dir " + media_dir + " is not readable: " + ec.message());
  // canonical() follows every symlink and needs every component to exist:
  // the check sees the file that would really be read (weakly_canonical left
  // `missing/../link.png` unresolved and read the link's outside target).
  const fs::path named = fs::path(path).is_absolute() ? fs::path(path) : root / path;
  const std::string r = root.string() + "/";
  auto outside = [&] { return bad_field(param, param + ": '" + path + "' is outside the server's media directory"); };
  if (!starts_with(named.lexically_normal().string(), r)) throw outside();
  const fs::path file = fs::canonical(named, ec);
  if (ec) throw bad_field(param, param + ": '" + path + "' is not a file in the media directory");
  if (!starts_with(file.string(), r)) throw outside();
  if (!fs::is_regular_file(file, ec)) throw bad_field(param, param + ": '" + path + "' is not a file in the media directory");
  try {
    return media.load_file(file.string(), kind);
  } catch (const Error& e) {
    throw bad_field(param, param + ": " + e.what());
  }
}

}  // namespace splitdec::serve
