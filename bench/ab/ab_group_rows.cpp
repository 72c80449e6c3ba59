// How the Q8_0 / Q4_0 row-group kernels (simd/row_groups.h) scale with the
// rows of one call: a model's worth of gemma3-1b MLP matrices (26 layers of gate,
// up and down, 660 MB: streamed from memory, as in a decode step) through
// linear() at 1 to 512 rows, median of several passes, GMAC/s and the
// weight bytes per second. The batched-decode goals (8 sequences >= 4x one)
// hinge on the 4-16 row rows: a decode step of R sequences reads the weights
// once and multiplies them R times.
//
// build: g++ -O2 -std=c++20 -Isrc -Iinclude bench/ab/ab_group_rows.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_group_rows
// usage: ab_group_rows [layers (default 26)] [q8_0 | q4_0 | q4_k | q5_k | q6_k (default q8_0)] [rows,rows,...
// (default 1,4,8,16,32,64,512)]. The K-quants take gemma3-12b's MLP shape (3840 x 15360: their rows are
// super-blocks of 256) with random block bytes, as tests/test_k_quants.cpp makes them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear.h"
#include "kernels/weight_matrix.h"

using namespace splitdec;

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 26;
  if (layers < 1 || layers > 1000) {
    std::fprintf(stderr, "ab_group_rows: layers must be 1-1000 (got %s)\n", argv[1]);
    return 2;
  }
  const std::string name = argc > 2 ? argv[2] : "q8_0";
  const std::pair<const char*, WeightFormat> formats[] = {{"q8_0", WeightFormat::Q8_0}, {"q4_0", WeightFormat::Q4_0},
                                                          {"q4_k", WeightFormat::Q4_K}, {"q5_k", WeightFormat::Q5_K},
                                                          {"q6_k", WeightFormat::Q6_K}};
  const auto found = std::find_if(std::begin(formats), std::end(formats), [&](const auto& f) { return name == f.first; });
  if (found == std::end(formats)) {
    std::fprintf(stderr, "ab_group_rows: format must be q8_0, q4_0, q4_k, q5_k or q6_k (got %s)\n", name.c_str());
    return 2;
  }
  const WeightFormat format = found->second;
  const bool k_quant = format == WeightFormat::Q4_K || format == WeightFormat::Q5_K || format == WeightFormat::Q6_K;
  const int hidden = k_quant ? 3840 : 1152, inner = k_quant ? 15360 : 6912;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 0.05f);
  auto grouped = [&](int out, int in) {
    WeightMatrix w;
    if (k_quant) {  // random bytes, each super-block's f16 factors (d, dmin: its first 4 bytes; Q6_K's d: its last 2) small
      std::vector<uint8_t> bytes(size_t(out) * weight_row_bytes(format, in));
      for (uint8_t& b : bytes) b = uint8_t(rng());
      const size_t block = weight_row_bytes(format, 256);
      const uint16_t small = 0x1800;  // f16 2^-9
      for (size_t at = 0; at < bytes.size(); at += block)
        for (size_t f : format == WeightFormat::Q6_K ? std::vector<size_t>{block - 2} : std::vector<size_t>{0, 2})
          std::memcpy(&bytes[at + f], &small, 2);
      w = WeightMatrix::from_bytes(format, out, in, bytes.data());
    } else {
      std::vector<float> f(size_t(out) * size_t(in));
      for (float& v : f) v = normal(rng);
      w = WeightMatrix::from_f32(format, out, in, f.data());
    }
    w.int8_activations = true;  // as --weights q8 / q4 load them
    w.group_rows();
    return w;
  };
  std::vector<WeightMatrix> ws;
  for (int l = 0; l < layers; ++l) {
    ws.push_back(grouped(inner, hidden));
    ws.push_back(grouped(inner, hidden));
    ws.push_back(grouped(hidden, inner));
  }
  double macs_per_row = 0, bytes = 0;
  for (const WeightMatrix& w : ws) macs_per_row += double(w.in) * w.out, bytes += double(w.bytes());
  std::printf("%s: %zu matrices, %.0f MB, %.2f GMAC per row\n", name.c_str(), ws.size(),
              bytes / 1e6, macs_per_row / 1e9);
  std::vector<int> row_counts = {1, 4, 8, 16, 32, 64, 512};
  if (argc > 3) {  // a comma-separated list instead
    row_counts.clear();
    for (const char* p = argv[3]; *p;) {
      const int rows = std::atoi(p);
      if (rows < 1 || rows > 4096) {
        std::fprintf(stderr, "ab_group_rows: row counts must be 1-4096 (got %s)\n", argv[3]);
        return 2;
      }
      row_counts.push_back(rows);
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
  }
  for (int rows : row_counts) {
    std::vector<float> x(size_t(rows) * size_t(inner)), y(size_t(rows) * size_t(inner));
    for (float& v : x) v = normal(rng);
    std::vector<double> times;
    for (int rep = 0; rep < (rows >= 64 ? 3 : 7); ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const WeightMatrix& w : ws) linear(x.data(), rows, w, y.data(), /*rows_independent=*/true);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double s = times[times.size() / 2];
    std::printf("rows %4d: %8.2f ms a pass, %6.1f GMAC/s, %5.1f GB/s of weights, %.2f ms per row\n", rows, s * 1e3,
                macs_per_row * rows / s / 1e9, bytes / s / 1e9, s * 1e3 / rows);
  }
}
