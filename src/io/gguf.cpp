#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"

namespace splitdec {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "uint8";
    case GgufType::I8: return "int8";
    case GgufType::U16: return "uint16";
    case GgufType::I16: return "int16";
    case GgufType::U32: return "uint32";
    case GgufType::I32: return "int32";
    case GgufType::F32: return "float32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "uint64";
    case GgufType::I64: return "int64";
    case GgufType::F64: return "float64";
  }
  return "?";
}

namespace {

struct TypeTraits {
  const char* name;
  uint64_t block;  // elements per block
  uint64_t bytes;  // bytes per block
};

// Block geometry of the ggml types this reader can place in the file. A
// type outside the table cannot be sized, so the file cannot be checked.
const TypeTraits* type_traits(uint32_t type) {
  using namespace ggml_type;
  static const std::map<uint32_t, TypeTraits> table = {
      {F32, {"F32", 1, 4}},      {F16, {"F16", 1, 2}},      {BF16, {"BF16", 1, 2}},     {Q4_0, {"Q4_0", 32, 18}},
      {Q4_1, {"Q4_1", 32, 20}},  {Q5_0, {"Q5_0", 32, 22}},  {Q5_1, {"Q5_1", 32, 24}},   {Q8_0, {"Q8_0", 32, 34}},
      {Q8_1, {"Q8_1", 32, 36}},  {Q2_K, {"Q2_K", 256, 84}}, {Q3_K, {"Q3_K", 256, 110}}, {Q4_K, {"Q4_K", 256, 144}},
      {Q5_K, {"Q5_K", 256, 176}}, {Q6_K, {"Q6_K", 256, 210}}, {Q8_K, {"Q8_K", 256, 292}}, {I8, {"I8", 1, 1}},
      {I16, {"I16", 1, 2}},      {I32, {"I32", 1, 4}},      {I64, {"I64", 1, 8}},       {F64, {"F64", 1, 8}},
  };
  const auto it = table.find(type);
  return it == table.end() ? nullptr : &it->second;
}

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::String:
    case GgufType::Array: break;
  }
  return 0;
}

// Limits far past any real model, so that a lying count fails by name.
constexpr uint64_t kMaxKeyBytes = 65535;      // the GGUF spec's key limit
constexpr uint64_t kMaxTensorName = 256;      // ggml's own limit is 64
constexpr uint64_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kMaxElements = 1ull << 50;
constexpr uint64_t kMaxAlignment = 1ull << 20;

// A cursor over the file's bytes; every read checks what is left.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(name_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " + std::to_string(n_) + ")");
  }
  uint64_t left() const { return n_ - pos_; }
  size_t pos() const { return pos_; }
  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > left())
      fail(what + " needs " + std::to_string(bytes) + " bytes but only " + std::to_string(left()) + " are left (truncated file?)");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view string(const std::string& what, uint64_t limit) {
    const uint64_t len = read<uint64_t>(what + "'s length");
    if (len > limit) fail(what + " is " + std::to_string(len) + " bytes, more than the limit of " + std::to_string(limit));
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += len;
    return s;
  }
  const uint8_t* take(uint64_t bytes, const std::string& what) {
    need(bytes, what);
    const uint8_t* at = p_ + pos_;
    pos_ += bytes;
    return at;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& name_;
};

void read_scalar(Reader& r, GgufType t, GgufValue& v, const std::string& what) {
  v.type = t;
  switch (t) {
    case GgufType::U8: v.u = r.read<uint8_t>(what); v.i = int64_t(v.u); break;
    case GgufType::I8: v.i = r.read<int8_t>(what); break;
    case GgufType::U16: v.u = r.read<uint16_t>(what); v.i = int64_t(v.u); break;
    case GgufType::I16: v.i = r.read<int16_t>(what); break;
    case GgufType::U32: v.u = r.read<uint32_t>(what); v.i = int64_t(v.u); break;
    case GgufType::I32: v.i = r.read<int32_t>(what); break;
    case GgufType::U64: v.u = r.read<uint64_t>(what); v.i = int64_t(v.u); break;
    case GgufType::I64: v.i = r.read<int64_t>(what); break;
    case GgufType::F32: v.f = r.read<float>(what); break;
    case GgufType::F64: v.f = r.read<double>(what); break;
    case GgufType::Bool: {
      const uint8_t b = r.read<uint8_t>(what);
      if (b > 1) r.fail(what + " is a bool holding " + std::to_string(b) + " (must be 0 or 1)");
      v.b = b != 0;
      break;
    }
    case GgufType::String: v.s = r.string(what, UINT64_MAX); break;
    case GgufType::Array: break;
  }
  if (t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64) v.u = uint64_t(v.i);
}

GgufType read_type(Reader& r, const std::string& what) {
  const uint32_t t = r.read<uint32_t>(what + "'s type");
  if (t > uint32_t(GgufType::F64)) r.fail(what + " has unknown value type " + std::to_string(t) + " (0 to 12 are defined)");
  return GgufType(t);
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  const TypeTraits* t = type_traits(type);
  return t ? t->name : "type " + std::to_string(type);
}

GgufFile GgufFile::parse(const uint8_t* bytes, size_t size, const std::string& name) {
  GgufFile g;
  g.name_ = name;
  Reader r(bytes, size, g.name_);
  r.need(4, "the magic 'GGUF'");
  if (std::memcmp(bytes, "GGUF", 4) != 0) r.fail("not a GGUF file (it does not start with 'GGUF')");
  r.take(4, "magic");
  g.version_ = r.read<uint32_t>("the version");
  if (g.version_ != 2 && g.version_ != 3)
    r.fail("GGUF version " + std::to_string(g.version_) + " is not supported (2 and 3 are)");
  const uint64_t n_tensors = r.read<uint64_t>("the tensor count");
  const uint64_t n_kv = r.read<uint64_t>("the metadata count");
  // A key/value takes at least 13 bytes (length, type, one byte), a tensor
  // info at least 24: counts beyond what is left cannot be true.
  if (n_kv > r.left() / 13)
    r.fail("metadata count " + std::to_string(n_kv) + " is more than the " + std::to_string(r.left()) + " bytes left can hold");
  if (n_tensors > r.left() / 24)
    r.fail("tensor count " + std::to_string(n_tensors) + " is more than the " + std::to_string(r.left()) + " bytes left can hold");

  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key(r.string("metadata key " + std::to_string(k), kMaxKeyBytes));
    const std::string what = "metadata '" + key + "'";
    if (g.metadata_.count(key)) r.fail(what + " appears twice");
    GgufValue v;
    v.type = read_type(r, what);
    if (v.type == GgufType::Array) {
      v.elem = read_type(r, what + "'s elements");
      v.count = r.read<uint64_t>(what + "'s element count");
      if (v.elem == GgufType::Array) r.fail(what + " is an array of arrays, which this reader does not take");
      if (v.elem == GgufType::String) {
        // Each string takes at least its 8-byte length.
        if (v.count > r.left() / 8)
          r.fail(what + " claims " + std::to_string(v.count) + " strings, more than the " + std::to_string(r.left()) +
                 " bytes left can hold");
        v.strings.reserve(size_t(v.count));
        for (uint64_t e = 0; e < v.count; ++e) v.strings.push_back(r.string(what + "[" + std::to_string(e) + "]", UINT64_MAX));
      } else {
        const uint64_t es = scalar_size(v.elem);
        if (v.count > r.left() / es)
          r.fail(what + " claims " + std::to_string(v.count) + " elements of " + std::to_string(es) + " bytes, more than the " +
                 std::to_string(r.left()) + " bytes left");
        v.elems = r.take(v.count * es, what);
        if (v.elem == GgufType::Bool)
          for (uint64_t e = 0; e < v.count; ++e)
            if (v.elems[e] > 1) r.fail(what + "[" + std::to_string(e) + "] is a bool holding " + std::to_string(v.elems[e]));
      }
    } else {
      read_scalar(r, v.type, v, what);
    }
    g.metadata_.emplace(key, std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufType::U32) r.fail("metadata 'general.alignment' is " + std::string(gguf_type_name(a->type)) + ", not uint32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > kMaxAlignment)
      r.fail("general.alignment " + std::to_string(a->u) + " is not a power of two up to " + std::to_string(kMaxAlignment));
    g.alignment_ = a->u;
  }

  g.tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = std::string(r.string("tensor name " + std::to_string(k), kMaxTensorName));
    const std::string what = "tensor '" + t.name + "'";
    if (g.tensor_index_.count(t.name)) r.fail(what + " appears twice");
    const uint32_t n_dims = r.read<uint32_t>(what + "'s dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail(what + " has " + std::to_string(n_dims) + " dimensions (1 to " + std::to_string(kMaxDims) + " are allowed)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = r.read<uint64_t>(what + "'s dimension " + std::to_string(d));
      if (n > kMaxElements || (n != 0 && elements > kMaxElements / n))
        r.fail(what + " has more than " + std::to_string(kMaxElements) + " elements");
      elements *= n;
      t.ne.push_back(n);
    }
    t.type = r.read<uint32_t>(what + "'s type");
    const TypeTraits* traits = type_traits(t.type);
    if (!traits) r.fail(what + " has tensor type " + std::to_string(t.type) + ", which this reader cannot size");
    if (t.ne[0] % traits->block != 0)
      r.fail(what + " rows hold " + std::to_string(t.ne[0]) + " elements, not a multiple of " + traits->name + "'s block of " +
             std::to_string(traits->block));
    t.nbytes = elements / traits->block * traits->bytes;
    t.offset = r.read<uint64_t>(what + "'s data offset");
    if (t.offset % g.alignment_ != 0)
      r.fail(what + "'s data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(g.alignment_));
    g.tensor_index_.emplace(t.name, g.tensors_.size());
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t infos_end = r.pos();
  g.data_offset_ = (infos_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  const uint64_t data_size = g.data_offset_ <= size ? size - g.data_offset_ : 0;
  std::vector<size_t> order;
  for (size_t k = 0; k < g.tensors_.size(); ++k) {
    GgufTensor& t = g.tensors_[k];
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw FormatError(name + ": tensor '" + t.name + "' spans bytes [" + std::to_string(t.offset) + ", " +
                        std::to_string(t.offset + t.nbytes) + ") of the data section, which holds " + std::to_string(data_size) +
                        " bytes (truncated file or lying offset)");
    t.data = bytes + g.data_offset_ + t.offset;
    if (t.nbytes > 0) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.tensors_[a].offset < g.tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = g.tensors_[order[k - 1]];
    const GgufTensor& cur = g.tensors_[order[k]];
    if (cur.offset < prev.offset + prev.nbytes)
      throw FormatError(name + ": tensors '" + prev.name + "' and '" + cur.name + "' overlap in the data section");
  }
  return g;
}

std::shared_ptr<const GgufFile> GgufFile::open(const std::string& path) {
  auto file = std::make_shared<const MappedFile>(path);
  auto g = std::make_shared<GgufFile>(parse(file->data(), file->size(), path));
  g->file_ = std::move(file);
  return g;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
bool is_integer(GgufType t) {
  return t == GgufType::U8 || t == GgufType::I8 || t == GgufType::U16 || t == GgufType::I16 || t == GgufType::U32 ||
         t == GgufType::I32 || t == GgufType::U64 || t == GgufType::I64;
}
bool is_signed(GgufType t) { return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64; }

// Element e of a numeric array as a scalar value.
GgufValue element(const GgufValue& a, uint64_t e) {
  GgufValue v;
  const std::string none;
  Reader r(a.elems + e * scalar_size(a.elem), scalar_size(a.elem), none);
  read_scalar(r, a.elem, v, "element");
  return v;
}
}  // namespace

std::optional<int64_t> GgufFile::integer(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type))
    throw FormatError(name_ + ": metadata '" + key + "' is " + gguf_type_name(v->type) + ", expected an integer");
  if (v->type == GgufType::U64 && v->u > uint64_t(INT64_MAX))
    throw FormatError(name_ + ": metadata '" + key + "' value " + std::to_string(v->u) + " is too large");
  return v->i;
}

std::optional<double> GgufFile::number(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (is_integer(v->type)) return is_signed(v->type) ? double(v->i) : double(v->u);
  throw FormatError(name_ + ": metadata '" + key + "' is " + gguf_type_name(v->type) + ", expected a number");
}

std::optional<bool> GgufFile::boolean(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::Bool) throw FormatError(name_ + ": metadata '" + key + "' is " + gguf_type_name(v->type) + ", expected bool");
  return v->b;
}

std::optional<std::string> GgufFile::string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::String)
    throw FormatError(name_ + ": metadata '" + key + "' is " + gguf_type_name(v->type) + ", expected a string");
  return std::string(v->s);
}

std::vector<std::string_view> GgufFile::strings(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufType::Array || v->elem != GgufType::String)
    throw FormatError(name_ + ": metadata '" + key + "' is not an array of strings");
  return v->strings;
}

std::vector<double> GgufFile::numbers(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufType::Array || !(is_integer(v->elem) || v->elem == GgufType::F32 || v->elem == GgufType::F64))
    throw FormatError(name_ + ": metadata '" + key + "' is not an array of numbers");
  std::vector<double> out(size_t(v->count));
  for (uint64_t e = 0; e < v->count; ++e) {
    const GgufValue x = element(*v, e);
    out[size_t(e)] = v->elem == GgufType::F32 || v->elem == GgufType::F64 ? x.f : is_signed(v->elem) ? double(x.i) : double(x.u);
  }
  return out;
}

std::vector<int64_t> GgufFile::integers(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufType::Array || !is_integer(v->elem))
    throw FormatError(name_ + ": metadata '" + key + "' is not an array of integers");
  std::vector<int64_t> out(size_t(v->count));
  for (uint64_t e = 0; e < v->count; ++e) out[size_t(e)] = element(*v, e).i;
  return out;
}

std::vector<bool> GgufFile::booleans(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufType::Array || v->elem != GgufType::Bool)
    throw FormatError(name_ + ": metadata '" + key + "' is not an array of bools");
  std::vector<bool> out(size_t(v->count));
  for (uint64_t e = 0; e < v->count; ++e) out[size_t(e)] = v->elems[e] != 0;
  return out;
}

bool is_gguf_path(const std::string& path) {
  std::error_code ec;
  return std::filesystem::path(path).extension() == ".gguf" && std::filesystem::is_regular_file(path, ec);
}

}  // namespace splitdec
