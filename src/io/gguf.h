// GGUF, llama.cpp's model file (versions 2 and 3, little-endian): a header,
// typed metadata key/values, tensor infos, and tensor data at aligned
// offsets. Parsed in place from memory (a mapped file); every count, length
// and offset is checked against the bytes that are left before anything
// sized by it is allocated, so a hostile file is a FormatError naming the
// thing and the limit, never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace splitdec {

class MappedFile;

// Metadata value types, numbered as the file stores them.
enum class GgufType : uint32_t { U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };
const char* gguf_type_name(GgufType t);

// ggml tensor types splitdec knows the block sizes of (ids as stored).
namespace ggml_type {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
                   Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30;
}
// "Q4_K", or "type N" for an id without a name here.
std::string ggml_type_name(uint32_t type);

struct GgufValue {
  GgufType type = GgufType::U8;
  // Scalars (and the elements of arrays, read through GgufFile's accessors).
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view s;
  // Arrays: the element type, the count, and the first element's bytes
  // (numbers and bools); string arrays are split into `strings`.
  GgufType elem = GgufType::U8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;
  std::vector<std::string_view> strings;
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps and parses `path`; FormatError naming it for anything malformed.
  static std::shared_ptr<const GgufFile> open(const std::string& path);
  // Parses bytes held in memory (they must outlive the result); `name` names them in errors.
  static GgufFile parse(const uint8_t* bytes, size_t size, const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(const std::string& name) const;
  const MappedFile* mapped() const { return file_.get(); }

  // Typed reads of a key: nullopt when absent; FormatError naming the key
  // when it holds another type (integers of any width convert where they fit).
  const GgufValue* find(const std::string& key) const;
  std::optional<int64_t> integer(const std::string& key) const;
  std::optional<double> number(const std::string& key) const;  // floats and integers
  std::optional<bool> boolean(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  // Arrays: empty when absent.
  std::vector<std::string_view> strings(const std::string& key) const;
  std::vector<double> numbers(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;
  std::vector<bool> booleans(const std::string& key) const;

 private:
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::shared_ptr<const MappedFile> file_;
};

// Whether `path` names a GGUF file (a regular file ending in .gguf).
bool is_gguf_path(const std::string& path);

}  // namespace splitdec
