// A read-only memory map of a whole file. Weights are read in place from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace splitdec {

class MappedFile {
 public:
  // Throws FormatError naming `path` when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  // Drops the whole pages inside [p, p + n) from this process's memory (they
  // are read again from the file if touched): a loader that copies a tensor
  // out calls it so that the file's pages and the copy are not both
  // resident. False when the range is not inside this mapping.
  bool release(const uint8_t* p, size_t n) const;
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace splitdec
