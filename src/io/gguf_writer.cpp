#include "io/gguf_writer.h"

#include "io/ggml_block_formats.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace splitdec {

namespace {
constexpr uint64_t kAlignment = 32;  // GGUF's default; general.alignment is then not written

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}
uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

void GgufMetadata::key(const std::string& k, GgufType t) {
  if (std::find(keys_.begin(), keys_.end(), k) != keys_.end()) throw Error("GGUF metadata '" + k + "' is added twice");
  keys_.push_back(k);
  put_string(bytes_, k);
  put<uint32_t>(bytes_, uint32_t(t));
  ++count_;
}
void GgufMetadata::add_u32(const std::string& k, uint32_t v) { key(k, GgufType::U32), put(bytes_, v); }
void GgufMetadata::add_i32(const std::string& k, int32_t v) { key(k, GgufType::I32), put(bytes_, v); }
void GgufMetadata::add_f32(const std::string& k, float v) { key(k, GgufType::F32), put(bytes_, v); }
void GgufMetadata::add_bool(const std::string& k, bool v) { key(k, GgufType::Bool), put<uint8_t>(bytes_, v ? 1 : 0); }
void GgufMetadata::add_string(const std::string& k, const std::string& v) { key(k, GgufType::String), put_string(bytes_, v); }
void GgufMetadata::add_strings(const std::string& k, const std::vector<std::string>& v) {
  key(k, GgufType::Array);
  put<uint32_t>(bytes_, uint32_t(GgufType::String));
  put<uint64_t>(bytes_, v.size());
  for (const std::string& s : v) put_string(bytes_, s);
}
void GgufMetadata::add_f32s(const std::string& k, const std::vector<float>& v) {
  key(k, GgufType::Array);
  put<uint32_t>(bytes_, uint32_t(GgufType::F32));
  put<uint64_t>(bytes_, v.size());
  for (float x : v) put(bytes_, x);
}
void GgufMetadata::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
  key(k, GgufType::Array);
  put<uint32_t>(bytes_, uint32_t(GgufType::I32));
  put<uint64_t>(bytes_, v.size());
  for (int32_t x : v) put(bytes_, x);
}
void GgufMetadata::add_bools(const std::string& k, const std::vector<bool>& v) {
  key(k, GgufType::Array);
  put<uint32_t>(bytes_, uint32_t(GgufType::Bool));
  put<uint64_t>(bytes_, v.size());
  for (bool x : v) put<uint8_t>(bytes_, x ? 1 : 0);
}

uint64_t GgufWriter::tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne) {
  uint64_t block = 1, bytes = 0;
  switch (type) {
    case ggml_type::F32: bytes = 4; break;
    case ggml_type::F16:
    case ggml_type::BF16: bytes = 2; break;
    case ggml_type::Q8_0: block = 32, bytes = 34; break;
    case ggml_type::Q4_0: block = 32, bytes = 18; break;
    default:
      if (GgmlBlocks g; ggml_blocks_of_type(type, &g)) {
        block = uint64_t(ggml_block_layout(g).values), bytes = ggml_block_layout(g).bytes;
        break;
      }
      throw Error("GGUF writer: tensor type " + ggml_type_name(type) + " is not written");
  }
  if (ne.empty() || ne[0] % block != 0) throw Error("GGUF writer: rows are not whole " + ggml_type_name(type) + " blocks");
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n / block * bytes;
}

struct GgufWriter::State {
  std::string path;
  std::vector<Entry> entries;
  std::vector<uint64_t> sizes;
  std::ofstream out;
  size_t current = 0;
  uint64_t written = 0;
  bool finished = false;
};

GgufWriter::GgufWriter(const std::string& path, const GgufMetadata& metadata, std::vector<Entry> tensors)
    : s_(std::make_unique<State>()) {
  s_->path = path;
  s_->entries = std::move(tensors);
  std::string head = "GGUF";
  put<uint32_t>(head, 3);
  put<uint64_t>(head, s_->entries.size());
  put<uint64_t>(head, metadata.count());
  head += metadata.bytes();
  uint64_t offset = 0;
  for (const Entry& e : s_->entries) {
    for (const Entry& other : s_->entries)
      if (&other != &e && other.name == e.name) throw Error(path + ": tensor '" + e.name + "' is listed twice");
    const uint64_t n = tensor_bytes(e.type, e.ne);
    put_string(head, e.name);
    put<uint32_t>(head, uint32_t(e.ne.size()));
    for (uint64_t d : e.ne) put<uint64_t>(head, d);
    put<uint32_t>(head, e.type);
    put<uint64_t>(head, offset);
    s_->sizes.push_back(n);
    offset += padded(n);
  }
  head.append(padded(head.size()) - head.size(), '\0');
  s_->out.open(partial_path(path), std::ios::binary | std::ios::trunc);
  if (!s_->out) throw FormatError(path + ": cannot create file (" + partial_path(path) + ")");
  s_->out.write(head.data(), std::streamsize(head.size()));
  while (s_->current < s_->sizes.size() && s_->sizes[s_->current] == 0) ++s_->current;
}

// A writer given up on (an error while its tensors were written) leaves no
// half file behind for a later load to trip over, and a file already at the
// path as it was: the bytes go to PATH.partial, renamed by finish().
GgufWriter::~GgufWriter() {
  if (s_ && !s_->finished) {
    s_->out.close();
    std::error_code ec;
    std::filesystem::remove(partial_path(s_->path), ec);
  }
}

std::string GgufWriter::partial_path(const std::string& path) { return path + ".partial"; }

void GgufWriter::write(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  static const char zeros[kAlignment] = {};
  while (n > 0) {
    if (s_->current >= s_->entries.size()) throw Error(s_->path + ": more bytes written than the tensors hold");
    const uint64_t size = s_->sizes[s_->current];
    const size_t take = size_t(std::min<uint64_t>(size - s_->written, n));
    s_->out.write(reinterpret_cast<const char*>(p), std::streamsize(take));
    p += take, n -= take, s_->written += take;
    if (s_->written == size) {
      s_->out.write(zeros, std::streamsize(padded(size) - size));
      s_->written = 0;
      do ++s_->current;
      while (s_->current < s_->sizes.size() && s_->sizes[s_->current] == 0);
    }
  }
  if (!s_->out) throw FormatError(s_->path + ": write failed (is the disk full?)");
}

void GgufWriter::finish() {
  if (s_->current < s_->entries.size())
    throw Error(s_->path + ": tensor '" + s_->entries[s_->current].name + "' was not written in full");
  s_->out.close();
  if (!s_->out) throw FormatError(s_->path + ": write failed (is the disk full?)");
  std::error_code ec;
  std::filesystem::rename(partial_path(s_->path), s_->path, ec);
  if (ec) throw FormatError(s_->path + ": cannot move " + partial_path(s_->path) + " into place: " + ec.message());
  s_->finished = true;
}

}  // namespace splitdec
