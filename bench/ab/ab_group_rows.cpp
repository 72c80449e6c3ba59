// How the Q8_0 / Q4_0 row-group kernels (simd/row_groups.h) scale with the
// rows of one call: a model's worth of gemma3-1b MLP matrices (26 layers of gate,
// up and down, 660 MB: streamed from memory, as in a decode step) through
// linear() at 1 to 512 rows, median of several passes, GMAC/s and the
// weight bytes per second. The batched-decode goals (8 sequences >= 4x one)
// hinge on the 4-16 row rows: a decode step of R sequences reads the weights
// once and multiplies them R times.
//
// build: g++ -O2 -std=c++20 -Isrc -Iinclude bench/ab/ab_group_rows.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_group_rows
// usage: ab_group_rows [layers (default 26)] [q8_0 | q4_0 (default q8_0)] [rows,rows,... (default 1,4,8,16,32,64,512)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  const WeightFormat format = argc > 2 && std::string(argv[2]) == "q4_0" ? WeightFormat::Q4_0 : WeightFormat::Q8_0;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 0.05f);
  auto grouped = [&](int out, int in) {
    std::vector<float> f(size_t(out) * size_t(in));
    for (float& v : f) v = normal(rng);
    WeightMatrix w = WeightMatrix::from_f32(format, out, in, f.data());
    w.int8_activations = true;  // as --weights q8 / q4 load them
    w.group_rows();
    return w;
  };
  std::vector<WeightMatrix> ws;
  for (int l = 0; l < layers; ++l) {
    ws.push_back(grouped(6912, 1152));
    ws.push_back(grouped(6912, 1152));
    ws.push_back(grouped(1152, 6912));
  }
  double macs_per_row = 0, bytes = 0;
  for (const WeightMatrix& w : ws) macs_per_row += double(w.in) * w.out, bytes += double(w.bytes());
  std::printf("%s: %zu matrices, %.0f MB, %.2f GMAC per row\n", format == WeightFormat::Q4_0 ? "q4_0" : "q8_0", ws.size(),
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
    std::vector<float> x(size_t(rows) * 6912), y(size_t(rows) * 6912);
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
