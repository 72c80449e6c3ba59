// NumPy .npy files: float32 arrays in and out (media embeddings, logits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace splitdec {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order
};

// Reads a little-endian float32 ('<f4') C-order array; anything else is a
// FormatError naming the file and what was found.
NpyArray read_npy(const std::string& path);

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace splitdec
