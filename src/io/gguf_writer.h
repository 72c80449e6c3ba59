// Writes GGUF version 3 files as llama.cpp's gguf-py writes them: the
// header, the metadata in the order added, the tensor infos, then each
// tensor's data at offsets aligned to 32 bytes. Tensor data is streamed in
// pieces of any size, so a file of any size is written without holding it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace splitdec {

// Metadata key/values, serialized as they are added (the file keeps that order).
class GgufMetadata {
 public:
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_f32s(const std::string& key, const std::vector<float>& v);
  void add_i32s(const std::string& key, const std::vector<int32_t>& v);
  void add_bools(const std::string& key, const std::vector<bool>& v);

  size_t count() const { return count_; }
  const std::string& bytes() const { return bytes_; }

 private:
  void key(const std::string& k, GgufType t);
  std::string bytes_;
  std::vector<std::string> keys_;
  size_t count_ = 0;
};

class GgufWriter {
 public:
  struct Entry {
    std::string name;
    uint32_t type;             // ggml_type::...
    std::vector<uint64_t> ne;  // ggml order: ne[0] is the row length
  };
  GgufWriter(const std::string& path, const GgufMetadata& metadata, std::vector<Entry> tensors);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  // The next bytes of the current tensor (a tensor is done when its byte
  // count is reached; a piece may not run past it).
  void write(const void* bytes, size_t n);
  // Every tensor written: pads, flushes, closes and moves the file into
  // place (it is written as partial_path(path)). Error otherwise. A writer
  // destroyed before finish() succeeds removes its partial file and leaves
  // whatever was at `path` untouched.
  void finish();

  // Bytes of a tensor of `type` and shape `ne` (Error for a type without a
  // known block size, or rows that are not whole blocks).
  static uint64_t tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne);
  // Where the bytes go until finish(): PATH.partial.
  static std::string partial_path(const std::string& path);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace splitdec
