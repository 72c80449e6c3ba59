// safetensors: mmap'd reading with a fully validated header, sharded
// checkpoints through model.safetensors.index.json, and a writer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace splitdec {

class MappedFile;

// "[2, 3]": a shape for error messages.
std::string shape_text(const std::vector<int64_t>& shape);
// Bytes of a tensor of this dtype and shape.
uint64_t tensor_nbytes(DType dtype, const std::vector<int64_t>& shape);

// Tensors held as llama.cpp blocks: `shape` is the logical [out, in],
// `data` the blocks. Q8_0 / Q4_0 are byte for byte WeightMatrix's; the
// others convert while loading (io/ggml_block_formats.h).
enum class BlockType : uint8_t { None, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };

struct TensorView {
  std::string name;
  std::string file;  // for error messages
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  BlockType blocks = BlockType::None;  // set: dtype is U8 and data the blocks

  int64_t numel() const;
  // Converts every element to f32 (the reference path works in f32).
  std::vector<float> to_f32() const;
  // The index of the first NaN or Inf element, or -1.
  int64_t first_non_finite() const;
};

// Parses and validates a safetensors header held in memory. `bytes` must stay
// alive as long as the returned views. Every error is a FormatError naming
// `file_name`, the tensor (when there is one) and the reason.
std::map<std::string, TensorView> parse_safetensors(const uint8_t* bytes, size_t size,
                                                    const std::string& file_name);

// All tensors of a model directory: model.safetensors, or the shards listed
// in model.safetensors.index.json.
class TensorStore {
 public:
  static TensorStore open_dir(const std::string& dir);
  static TensorStore open_file(const std::string& path);
  // A GGUF file's tensors under checkpoint names (io/families/gguf_model.h).
  // open_dir takes a .gguf path too and comes here.
  static TensorStore open_gguf(const std::string& path);
  // An mmproj GGUF's media towers under checkpoint names (io/families/mmproj.h).
  static TensorStore open_mmproj(const std::string& path);

  TensorStore(TensorStore&&) noexcept;
  TensorStore& operator=(TensorStore&&) noexcept;
  ~TensorStore();

  const TensorView* find(const std::string& name) const;
  // Like find, but a missing tensor is a FormatError naming it.
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  std::string describe() const;  // the file(s) it came from
  // A loader that has copied `v` out: its file pages leave this process's
  // memory (MappedFile::release), so peak RSS is the copy, not copy + file.
  void release(const TensorView& v) const;
  // The file holding v's bytes and their offset in it, when v lies in one of
  // this store's mapped files (a reader that would rather pread than map).
  bool file_position(const TensorView& v, std::string* path, uint64_t* offset) const;
  // Copies v's bytes to dst (v.nbytes of room) a few MiB at a time, releasing
  // each piece's file pages once copied: loading a tensor never holds it twice.
  void copy_out(const TensorView& v, uint8_t* dst) const;

 private:
  TensorStore();
  void add_file(const std::string& path);
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<std::shared_ptr<const void>> owned_;  // values some views point to instead of a file
  std::map<std::string, TensorView> tensors_;
};

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Streams tensors into one safetensors file: the header (every tensor's
// name, dtype and shape, in the order given) is written first, then each
// tensor's bytes in that order, in pieces of any size. A file of any size is
// written without holding it, or even one tensor, in memory.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::string& path, std::vector<Entry> entries, const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // The next bytes of the current tensor (a tensor is done when its byte
  // count is reached; a piece may not run past it).
  void write(const void* bytes, size_t n);
  // Every tensor written: flushes and closes. Error otherwise.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Writes tensors in the given order, 8-byte aligned data.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace splitdec
