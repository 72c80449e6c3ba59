#include "io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/gguf.h"
#include "io/families/gguf_model.h"
#include "io/families/mmproj.h"

namespace splitdec {

using nlohmann::json;
namespace fs = std::filesystem;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

uint64_t tensor_nbytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

// A 16-bit float is non-finite exactly when its exponent bits are all ones.
int64_t TensorView::first_non_finite() const {
  const int64_t n = numel();
  if (!dtype_is_float(dtype)) return -1;
  if (dtype == DType::F32) {
    for (int64_t k = 0; k < n; ++k) {
      float x;
      std::memcpy(&x, data + 4 * k, 4);
      if (!std::isfinite(x)) return k;
    }
    return -1;
  }
  const uint16_t mask = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
  for (int64_t k = 0; k < n; ++k) {
    uint16_t h;
    std::memcpy(&h, data + 2 * k, 2);
    if ((h & mask) == mask) return k;
  }
  return -1;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> TensorView::to_f32() const {
  if (!dtype_is_float(dtype))
    throw FormatError(file + ": tensor '" + name + "' is stored as " + dtype_name(dtype) +
                      " (quantized block values), which only the decoder's matrices may be; this one must be F32, BF16 or F16");
  const size_t n = size_t(numel());
  std::vector<float> out(n);
  const size_t es = dtype_size(dtype);
  if (dtype == DType::F32) {
    std::copy_n(reinterpret_cast<const uint8_t*>(data), n * 4, reinterpret_cast<uint8_t*>(out.data()));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = load_as_f32(dtype, data + i * es);
  }
  return out;
}

namespace {

// Header larger than this is refused before parsing (HF uses 100 MB too).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::F32;
  else if (s == "BF16") *out = DType::BF16;
  else if (s == "F16") *out = DType::F16;
  else if (s == "I8") *out = DType::I8;
  else if (s == "U8") *out = DType::U8;
  else return false;
  return true;
}

}  // namespace

std::map<std::string, TensorView> parse_safetensors(const uint8_t* bytes, size_t size,
                                                    const std::string& file_name) {
  auto fail = [&](const std::string& what) { throw FormatError(file_name + ": " + what); };
  if (size < 8) fail("file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
  if (header_len > kMaxHeaderBytes)
    fail("header length " + std::to_string(header_len) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes));
  if (header_len > size - 8)
    fail("header length " + std::to_string(header_len) + " runs past the end of the file (" + std::to_string(size) +
         " bytes)");
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");

  const uint8_t* data_start = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::map<std::string, TensorView> out;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::vector<std::string> span_names;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail("__metadata__ is not an object");
      continue;
    }
    auto tfail = [&](const std::string& what) { fail("tensor '" + name + "': " + what); };
    const json& t = *it;
    if (!t.is_object()) tfail("entry is not an object");
    if (!t.contains("dtype") || !t["dtype"].is_string()) tfail("missing or non-string dtype");
    if (!t.contains("shape") || !t["shape"].is_array()) tfail("missing or non-array shape");
    if (!t.contains("data_offsets") || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
      tfail("data_offsets must be an array of two integers");
    TensorView v;
    v.name = name;
    v.file = file_name;
    const std::string dt = t["dtype"].get<std::string>();
    if (!parse_dtype(dt, &v.dtype)) tfail("dtype " + dt + " is not supported (F32, BF16, F16 are, and I8 / U8 for quantized blocks)");
    uint64_t count = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned()) tfail("shape entries must be non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && count > (uint64_t(1) << 50) / dim) tfail("shape is too large");
      count *= dim;
      v.shape.push_back(int64_t(dim));
    }
    const json& offs = t["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      tfail("data_offsets must be non-negative integers");
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end) tfail("data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
    if (end > data_size)
      tfail("data_offsets end " + std::to_string(end) + " lies outside the data section (" +
            std::to_string(data_size) + " bytes)");
    const uint64_t want = count * dtype_size(v.dtype);
    if (end - begin != want)
      tfail("byte span " + std::to_string(end - begin) + " != shape x dtype size " + std::to_string(want));
    v.data = data_start + begin;
    v.nbytes = size_t(want);
    spans.emplace_back(begin, end);
    span_names.push_back(name);
    out.emplace(name, std::move(v));
  }
  // Overlap check: sort spans by start, neighbours must not intersect.
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spans[a] < spans[b]; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = spans[order[k - 1]];
    const auto& cur = spans[order[k]];
    if (cur.first < prev.second && cur.first != cur.second && prev.first != prev.second)
      fail("tensors '" + span_names[order[k - 1]] + "' and '" + span_names[order[k]] + "' overlap");
  }
  return out;
}

TensorStore::TensorStore() = default;
TensorStore::TensorStore(TensorStore&&) noexcept = default;
TensorStore& TensorStore::operator=(TensorStore&&) noexcept = default;
TensorStore::~TensorStore() = default;

void TensorStore::add_file(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  auto parsed = parse_safetensors(file->data(), file->size(), path);
  for (auto& [name, view] : parsed) {
    if (tensors_.count(name)) throw FormatError(path + ": tensor '" + name + "' also appears in another shard");
    tensors_.emplace(name, std::move(view));
  }
  files_.push_back(std::move(file));
}

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore s;
  s.add_file(path);
  return s;
}

TensorStore TensorStore::open_gguf(const std::string& path) {
  const std::shared_ptr<const GgufFile> gguf = GgufFile::open(path);
  TensorStore s;
  s.tensors_ = tensors_from_gguf(*gguf);
  // The views point into the mapping, which the store keeps.
  s.files_.push_back(std::shared_ptr<const MappedFile>(gguf, gguf->mapped()));
  return s;
}

TensorStore TensorStore::open_mmproj(const std::string& path) {
  const std::shared_ptr<const GgufFile> gguf = GgufFile::open(path);
  TensorStore s;
  MmprojTensors t = tensors_from_mmproj(*gguf);
  s.tensors_ = std::move(t.views);
  s.owned_.assign(t.owned.begin(), t.owned.end());  // tensors the reader rewrote point here
  s.files_.push_back(std::shared_ptr<const MappedFile>(gguf, gguf->mapped()));
  return s;
}

TensorStore TensorStore::open_dir(const std::string& dir) {
  if (is_gguf_path(dir)) return open_gguf(dir);
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return open_file(single.string());
  if (!fs::exists(index))
    throw FormatError(dir + ": neither model.safetensors nor model.safetensors.index.json exists");
  json j;
  {
    std::ifstream in(index);
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw FormatError(index.string() + ": not valid JSON: " + e.what());
    }
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw FormatError(index.string() + ": missing object 'weight_map'");
  std::vector<std::string> shards;
  std::map<std::string, std::string> expected;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) throw FormatError(index.string() + ": weight_map['" + it.key() + "'] is not a string");
    const std::string shard = it->get<std::string>();
    if (shard.find('/') != std::string::npos || shard == "..")
      throw FormatError(index.string() + ": shard name '" + shard + "' must be a file in the model directory");
    expected[it.key()] = shard;
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
  }
  TensorStore s;
  for (const auto& shard : shards) s.add_file((fs::path(dir) / shard).string());
  for (const auto& [name, shard] : expected) {
    const TensorView* v = s.find(name);
    if (!v) throw FormatError(index.string() + ": tensor '" + name + "' is listed in shard " + shard + " but not found");
    if (fs::path(v->file).filename() != shard)
      throw FormatError(index.string() + ": tensor '" + name + "' is listed in " + shard + " but found in " + v->file);
  }
  return s;
}

void TensorStore::release(const TensorView& v) const {
  for (const auto& f : files_)
    if (f->release(v.data, v.nbytes)) return;
}

bool TensorStore::file_position(const TensorView& v, std::string* path, uint64_t* offset) const {
  for (const auto& f : files_) {
    const uint8_t* base = f->data();
    if (!base || v.data < base || v.nbytes > f->size() || size_t(v.data - base) > f->size() - v.nbytes) continue;
    *path = f->path();
    *offset = uint64_t(v.data - base);
    return true;
  }
  return false;
}

void TensorStore::copy_out(const TensorView& v, uint8_t* dst) const {
  constexpr size_t kPiece = size_t(8) << 20;
  for (size_t off = 0; off < v.nbytes; off += kPiece) {
    TensorView piece = v;
    piece.data = v.data + off;
    piece.nbytes = std::min(kPiece, v.nbytes - off);
    std::memcpy(dst + off, piece.data, piece.nbytes);
    release(piece);
  }
}

const TensorView* TensorStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& TensorStore::get(const std::string& name) const {
  const TensorView* v = find(name);
  if (!v) throw FormatError(describe() + ": required tensor '" + name + "' is missing");
  return *v;
}

std::string TensorStore::describe() const {
  if (files_.size() == 1) return files_[0]->path();
  std::string s;
  for (const auto& f : files_) s += (s.empty() ? "" : ", ") + f->path();
  return "[" + s + "]";
}

struct SafetensorsWriter::State {
  std::string path;
  std::vector<Entry> entries;
  std::vector<uint64_t> sizes;
  std::ofstream out;
  size_t current = 0;     // the tensor being written
  uint64_t written = 0;   // of its bytes
};

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Entry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : s_(std::make_unique<State>()) {
  s_->path = path;
  s_->entries = std::move(entries);
  // nlohmann::ordered_json keeps tensors in the order given so the same
  // input gives the same bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Entry& e : s_->entries) {
    if (header.contains(e.name)) throw Error(path + ": tensor '" + e.name + "' is listed twice");
    const uint64_t want = tensor_nbytes(e.dtype, e.shape);
    header[e.name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + want}}};
    s_->sizes.push_back(want);
    offset += want;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // 8-byte aligned data
  s_->out.open(path, std::ios::binary | std::ios::trunc);
  if (!s_->out) throw FormatError(path + ": cannot create file");
  const uint64_t len = h.size();
  char lb[8];
  for (int i = 0; i < 8; ++i) lb[i] = char((len >> (8 * i)) & 0xff);
  s_->out.write(lb, 8);
  s_->out.write(h.data(), std::streamsize(h.size()));
  while (s_->current < s_->sizes.size() && s_->sizes[s_->current] == 0) ++s_->current;
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::write(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  while (n > 0) {
    if (s_->current >= s_->entries.size()) throw Error(s_->path + ": more bytes written than the header's tensors hold");
    const uint64_t room = s_->sizes[s_->current] - s_->written;
    const size_t take = size_t(std::min<uint64_t>(room, n));
    s_->out.write(reinterpret_cast<const char*>(p), std::streamsize(take));
    p += take, n -= take, s_->written += take;
    if (s_->written == s_->sizes[s_->current]) {
      s_->written = 0;
      do ++s_->current;
      while (s_->current < s_->sizes.size() && s_->sizes[s_->current] == 0);
    }
  }
  if (!s_->out) throw FormatError(s_->path + ": write failed (is the disk full?)");
}

void SafetensorsWriter::finish() {
  if (s_->current < s_->entries.size())
    throw Error(s_->path + ": tensor '" + s_->entries[s_->current].name + "' was not written in full");
  s_->out.close();
  if (!s_->out) throw FormatError(s_->path + ": write failed (is the disk full?)");
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& t : tensors) {
    if (tensor_nbytes(t.dtype, t.shape) != t.bytes.size()) throw Error("write_safetensors: tensor '" + t.name + "' has the wrong byte count");
    entries.push_back({t.name, t.dtype, t.shape});
  }
  SafetensorsWriter w(path, std::move(entries), metadata);
  for (const auto& t : tensors) w.write(t.bytes.data(), t.bytes.size());
  w.finish();
}

}  // namespace splitdec
