// One pass or two over a streamed weight group: the Q8_0 pair kernel
// (simd/row_groups.h) of this CPU's best table over 600 MB of grouped
// weights (gemma3-1b's 1152 inputs, random bytes), two threads each
// streaming its half from memory, as a decode step's matrices do. Rows 1, 4
// and 8 a call, and 8 rows as two calls of 4: the way 8 sequences met the
// weights before dot_rows took up to 8 rows a call (2026-12-07). Best of
// seven passes, each row count in turn, twice.
//
// build: g++ -O2 -std=c++20 -Isrc bench/ab/ab_group_pass.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_group_pass
// usage: ab_group_pass (SPLITDEC_SIMD / SPLITDEC_VNNI pick the table as for splitdec)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/row_groups.h"

using namespace splitdec;
using namespace splitdec::simd;

int main() {
  constexpr int kIn = 1152, kRows = 8;
  const size_t pair_bytes = 2 * size_t(kIn / 32) * kQ8GroupBlockBytes;
  const size_t pairs = (size_t(600) << 20) / pair_bytes / 2 * 2;
  HugePageVector<uint8_t> w(pairs * pair_bytes);
  std::mt19937 rng(1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(rng());
  for (size_t b = 0; b < w.size(); b += kQ8GroupBlockBytes)  // each block's 16 f16 scales small and finite
    for (int i = 0; i < kGroupRows; ++i) w[b + 2 * size_t(i) + 1] = 0x20;
  std::vector<std::vector<int8_t>> q(kRows, std::vector<int8_t>(kIn));
  std::vector<std::vector<float>> scale(kRows, std::vector<float>(kIn / 32, 0.01f));
  std::vector<std::vector<int32_t>> offset(kRows, std::vector<int32_t>(kIn / 32, 0));
  Q8Row x[kRows];
  for (int r = 0; r < kRows; ++r) {
    for (int8_t& v : q[size_t(r)]) v = int8_t(int(rng() % 255) - 127);
    x[r] = {scale[size_t(r)].data(), q[size_t(r)].data(), offset[size_t(r)].data()};
  }
  const GroupDot pair = row_group_kernels(best()).q8_pair;
  std::printf("%s kernels, %.0f MB of Q8_0 groups, 2 threads\n", row_group_kernels(best()).name, double(w.size()) / 1e6);
  // rows < 0: -rows as calls of 4.
  auto pass = [&](int rows) {
    std::vector<std::thread> threads;
    std::vector<float> sinks(2);
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        float out[kRows * 2 * kGroupRows];
        float sink = 0;
        for (size_t p = size_t(t) * pairs / 2; p < size_t(t + 1) * pairs / 2; ++p) {
          const uint8_t* group = w.data() + p * pair_bytes;
          if (rows > 0) {
            pair(x, rows, group, kIn, out);
          } else {
            pair(x, 4, group, kIn, out);
            pair(x + 4, 4, group, kIn, out);
          }
          sink += out[5];
        }
        sinks[size_t(t)] = sink;
      });
    for (std::thread& t : threads) t.join();
    return sinks[0] + sinks[1];
  };
  float sink = 0;
  for (int round = 0; round < 2; ++round)
    for (int rows : {1, 4, 8, -8}) {
      double best_s = 1e9;
      for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        sink += pass(rows);
        best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("%-22s %6.2f ms, %5.1f GB/s of weights\n", rows > 0 ? (std::to_string(rows) + " rows a call").c_str() : "8 rows as 2 calls of 4",
                  best_s * 1e3, double(w.size()) / best_s / 1e9);
    }
  std::printf("(checksum %g)\n", double(sink));
}
