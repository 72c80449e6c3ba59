// A/B of two builds of the decode-attention kernel (attend_keys*): the table
// compiled from an older simd_vector.inc ("old", namespace old_*) against the
// current one ("new"), on one buffer, alternated run by run so that machine
// drift hits both alike. Built and run by scripts/ab_attend_keys.sh.
//
// usage: ab_attend_keys CONTEXT HEAD_DIM f32|bf16|f16|q8 [avx2]
// 8 KV heads of CONTEXT keys, 2 query heads each, split over 2 threads (the
// shape of bench decode_attention at Gemma-4-12B's layers).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "kernels/simd/kernel_table.h"
#include "../read_floor.h"

namespace splitdec::simd {
const KernelTable& old_avx512_table();
const KernelTable& new_avx512_table();
const KernelTable& old_avx2_table();
const KernelTable& new_avx2_table();
}  // namespace splitdec::simd

using namespace splitdec;

using splitdec::bench::read_streams;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s CONTEXT HEAD_DIM f32|bf16|f16|q8 [avx2]\n", argv[0]);
    return 2;
  }
  const int ctx = std::atoi(argv[1]), hd = std::atoi(argv[2]);
  const std::string type = argv[3];
  const bool avx2 = argc > 4 && std::string(argv[4]) == "avx2";
  const simd::KernelTable* tables[2] = {avx2 ? &simd::old_avx2_table() : &simd::old_avx512_table(),
                                        avx2 ? &simd::new_avx2_table() : &simd::new_avx512_table()};
  const int kv_heads = 8, group = 2;
  const size_t n = size_t(kv_heads) * size_t(ctx) * size_t(hd);
  const size_t elem = type == "f32" ? 4 : type == "q8" ? 1 : 2;
  std::vector<float> kf(n), vf(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < n; ++i) kf[i] = u(rng), vf[i] = u(rng);
  std::vector<uint16_t> k16, v16;
  std::vector<int8_t> k8, v8;
  // The stored K and V rows as bytes, for the floor's plain read.
  const char* kbytes = reinterpret_cast<const char*>(kf.data());
  const char* vbytes = reinterpret_cast<const char*>(vf.data());
  if (elem == 2) {
    k16.resize(n), v16.resize(n);
    for (size_t i = 0; i < n; ++i)
      k16[i] = type == "f16" ? f32_to_f16(kf[i]) : f32_to_bf16(kf[i]), v16[i] = type == "f16" ? f32_to_f16(vf[i]) : f32_to_bf16(vf[i]);
    kbytes = reinterpret_cast<const char*>(k16.data()), vbytes = reinterpret_cast<const char*>(v16.data());
  } else if (elem == 1) {
    k8.resize(n), v8.resize(n);
    for (size_t i = 0; i < n; ++i) k8[i] = int8_t(127 * kf[i]), v8[i] = int8_t(127 * vf[i]);
    kbytes = reinterpret_cast<const char*>(k8.data()), vbytes = reinterpret_cast<const char*>(v8.data());
  }
  if (elem != 4) kf = std::vector<float>(), vf = std::vector<float>();
  const std::vector<float> scales(size_t(kv_heads) * size_t(ctx), 1.f / 127), q(size_t(kv_heads * group * hd), 0.1f);
  auto heads = [&](const simd::KernelTable& t, int h0, int h1) {
    std::vector<float> acc(size_t(group * hd)), m(group), l(group);
    for (int h = h0; h < h1; ++h) {
      std::fill(acc.begin(), acc.end(), 0.f), std::fill(m.begin(), m.end(), -1e30f), std::fill(l.begin(), l.end(), 0.f);
      const size_t at = size_t(h) * size_t(ctx) * size_t(hd);
      const float* qh = q.data() + size_t(h * group * hd);
      if (type == "f32") t.attend_keys(qh, group, hd, 0.06f, 0, kf.data() + at, vf.data() + at, ctx, m.data(), l.data(), acc.data());
      else if (type == "bf16")
        t.attend_keys_bf16(qh, group, hd, 0.06f, 0, k16.data() + at, v16.data() + at, ctx, m.data(), l.data(), acc.data());
      else if (type == "f16")
        t.attend_keys_f16(qh, group, hd, 0.06f, 0, k16.data() + at, v16.data() + at, ctx, m.data(), l.data(), acc.data());
      else
        t.attend_keys_q8(qh, group, hd, 0.06f, 0, k8.data() + at, scales.data() + at / size_t(hd), v8.data() + at,
                         scales.data() + at / size_t(hd), ctx, m.data(), l.data(), acc.data());
    }
  };
  auto run = [&](const simd::KernelTable& t) {
    const auto t0 = std::chrono::steady_clock::now();
    std::thread other(heads, std::cref(t), 0, kv_heads / 2);
    heads(t, kv_heads / 2, kv_heads);
    other.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // The floor: the same K and V bytes read once by the same two threads, K
  // and V side by side as the kernel reads them, alternated with the kernels
  // so that each run's fraction of it is taken at one moment.
  const size_t head_bytes = size_t(ctx) * size_t(hd) * elem;
  auto read_heads = [&](int h0, int h1) { read_streams(kbytes + size_t(h0) * head_bytes, vbytes + size_t(h0) * head_bytes, size_t(h1 - h0) * head_bytes); };
  auto read_all = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    std::thread other(read_heads, 0, kv_heads / 2);
    read_heads(kv_heads / 2, kv_heads);
    other.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> times[2], floor_ratio[2];
  for (int it = 0; it < 15; ++it)
    for (int w = 0; w < 2; ++w) {
      const double f = read_all(), t = run(*tables[w]);
      times[w].push_back(t), floor_ratio[w].push_back(f / t);
    }
  const double bytes = 2.0 * double(n) * double(elem);
  for (int w = 0; w < 2; ++w) {
    std::sort(times[w].begin(), times[w].end());
    std::sort(floor_ratio[w].begin(), floor_ratio[w].end());
    std::printf("%s %-4s %s ctx %6d hd %3d: median %8.3f ms (%5.1f GB/s), %3.0f%% of a plain read's speed\n", w ? "new" : "old",
                type.c_str(), avx2 ? "avx2  " : "avx512", ctx, hd, times[w][7] * 1e3, bytes / times[w][7] / 1e9, 100 * floor_ratio[w][7]);
  }
  std::printf("new / old speed (medians): %.2fx\n", times[0][7] / times[1][7]);
  return 0;
}
