#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "core/error.h"

namespace splitdec {

namespace {

std::string header_value(const std::string& header, const std::string& key) {
  // The header is a Python dict literal; we only need three simple keys.
  std::regex re("'" + key + "'\\s*:\\s*(\\([^)]*\\)|'[^']*'|True|False)");
  std::smatch m;
  if (!std::regex_search(header, m, re)) return {};
  return m[1];
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open .npy file");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw FormatError(path + ": not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw FormatError(path + ": truncated .npy header");
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw FormatError(path + ": truncated .npy header");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  } else {
    throw FormatError(path + ": unsupported .npy version " + std::to_string(int(magic[6])));
  }
  if (header_len > (1u << 20)) throw FormatError(path + ": .npy header too long");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw FormatError(path + ": truncated .npy header");

  std::string descr = header_value(header, "descr");
  if (descr != "'<f4'")
    throw FormatError(path + ": dtype " + (descr.empty() ? "(missing)" : descr) +
                      " is not supported; expected float32 '<f4'");
  if (header_value(header, "fortran_order") != "False")
    throw FormatError(path + ": Fortran-order arrays are not supported");
  std::string shape_text = header_value(header, "shape");
  if (shape_text.empty()) throw FormatError(path + ": .npy header has no shape");

  // A shape is a tuple of non-negative integers: anything else (a sign, a
  // letter) is refused rather than skipped.
  static const std::regex tuple("^\\(\\s*(\\d+\\s*(,\\s*\\d+\\s*)*,?\\s*)?\\)$");
  if (!std::regex_match(shape_text, tuple)) throw FormatError(path + ": .npy shape " + shape_text + " is not a tuple of sizes");
  NpyArray arr;
  uint64_t count = 1;
  std::regex num("\\d+");
  for (auto it = std::sregex_iterator(shape_text.begin(), shape_text.end(), num); it != std::sregex_iterator(); ++it) {
    const std::string s = it->str();
    if (s.size() > 12) throw FormatError(path + ": .npy dimension " + s + " is too large");
    int64_t d = std::stoll(s);
    arr.shape.push_back(d);
    if (d != 0 && count > (uint64_t(1) << 40) / uint64_t(d))
      throw FormatError(path + ": .npy shape " + shape_text + " is too large");
    count *= uint64_t(d);
  }
  in.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(in.tellg());
  const uint64_t data_start = (magic[6] == 1 ? 10 : 12) + uint64_t(header_len);
  if (file_size < data_start || file_size - data_start != count * 4)
    throw FormatError(path + ": data holds " + std::to_string(file_size - std::min(file_size, data_start)) +
                      " bytes but shape " + shape_text + " needs " + std::to_string(count * 4));
  in.seekg(std::streamoff(data_start));
  arr.data.resize(count);
  in.read(reinterpret_cast<char*>(arr.data.data()), std::streamsize(count * 4));
  return arr;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string shape_text = "(";
  uint64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]);
    shape_text += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shape_text += " ";
    count *= uint64_t(shape[i]);
  }
  shape_text += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Pad so that the data starts on a 64-byte boundary, ending with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw FormatError(path + ": cannot create .npy file");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(header.size());
  char lb[2] = {char(len & 0xff), char(len >> 8)};
  out.write(lb, 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(count * 4));
  if (!out) throw FormatError(path + ": write failed");
}

}  // namespace splitdec
