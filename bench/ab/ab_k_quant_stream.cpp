// How close one K-quant row-group kernel (simd/row_groups.h) comes to a
// plain read of the same bytes: 600 MB of grouped Q4_K, Q5_K or Q6_K
// weights (gemma3-12b's 3840 inputs, random bytes with small f16 factors)
// against one activation row, as a decode step streams them, on one thread
// and on two (each its half), beside a plain 256-bit read of the same
// buffer. Best of five passes; the read and the kernel alternate, three
// rounds. The one-thread column is the steadier on a shared VM: the
// two-thread read there moves between ~50 and ~80 GB/s from minute to
// minute.
//
// build: g++ -O2 -std=c++20 -mavx2 -Isrc bench/ab/ab_k_quant_stream.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_k_quant_stream
// usage: ab_k_quant_stream [q4_k | q5_k | q6_k (default q4_k)] (SPLITDEC_SIMD / SPLITDEC_VNNI pick the table as for splitdec)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/row_groups.h"

using namespace splitdec;
using namespace splitdec::simd;

int main(int argc, char** argv) {
  const std::string format = argc > 1 ? argv[1] : "q4_k";
  const RowGroupKernels& kernels = row_group_kernels(best());
  const GroupDot dot = format == "q4_k" ? kernels.q4_k : format == "q5_k" ? kernels.q5_k : format == "q6_k" ? kernels.q6_k : nullptr;
  if (!dot) {
    std::fprintf(stderr, "ab_k_quant_stream: format must be q4_k, q5_k or q6_k (got %s)\n", format.c_str());
    return 2;
  }
  const int block_bytes = format == "q4_k" ? kQ4KGroupBlockBytes : format == "q5_k" ? kQ5KGroupBlockBytes : kQ6KGroupBlockBytes;
  constexpr int kIn = 3840;
  const size_t group_bytes = size_t(kIn / 256) * size_t(block_bytes);
  const size_t groups = (size_t(600) << 20) / group_bytes / 2 * 2;
  HugePageVector<uint8_t> w(groups * group_bytes);
  std::mt19937 rng(1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(rng());
  // Each super-block's f16 factors small and finite: Q4_K / Q5_K's d and
  // dmin (its first 64 bytes), Q6_K's d (its first 32).
  const int factor_bytes = format == "q6_k" ? 32 : 64;
  for (size_t b = 0; b < w.size(); b += size_t(block_bytes))
    for (int i = 1; i < factor_bytes; i += 2) w[b + size_t(i)] = 0x18;
  std::vector<int8_t> q(kIn);
  for (int8_t& v : q) v = int8_t(int(rng() % 255) - 127);
  std::vector<float> scale(kIn / 256, 0.01f);
  std::vector<int32_t> offset(kIn / 32, 0), pairs(kIn / 64, 0), halves(kIn / 32, 0);
  const Q8Row x{scale.data(), q.data(), offset.data(), pairs.data(), halves.data()};
  std::printf("%s kernels, %s, %.0f MB of groups\n", kernels.name, format.c_str(), double(w.size()) / 1e6);

  auto pass = [&](int threads, bool read) {
    std::vector<std::thread> workers;
    std::vector<float> sinks(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        float out[kGroupRows], sink = 0;
        for (size_t g = size_t(t) * groups / size_t(threads); g < size_t(t + 1) * groups / size_t(threads); ++g) {
          const uint8_t* p = w.data() + g * group_bytes;
          if (read) {
            __m256i a = _mm256_setzero_si256();
            for (size_t i = 0; i + 128 <= group_bytes; i += 128)
              for (size_t k = 0; k < 128; k += 32) a = _mm256_add_epi8(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + k)));
            sink += float(_mm256_extract_epi8(a, 3));
          } else {
            dot(&x, 1, p, kIn, out);
            sink += out[3];
          }
        }
        sinks[size_t(t)] = sink;
      });
    for (std::thread& t : workers) t.join();
    float total = 0;
    for (float s : sinks) total += s;
    return total;
  };
  float sink = 0;
  for (int round = 0; round < 3; ++round)
    for (bool read : {true, false}) {
      std::printf("%-8s", read ? "read" : "kernel");
      for (int threads : {1, 2}) {
        double best_s = 1e9;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          sink += pass(threads, read);
          best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("  %d thread%s %5.1f GB/s", threads, threads > 1 ? "s" : " ", double(w.size()) / best_s / 1e9);
      }
      std::printf("\n");
    }
  std::printf("(checksum %g)\n", double(sink));
}
