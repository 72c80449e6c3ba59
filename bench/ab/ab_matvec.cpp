// A/B of two builds of the 16-bit and f32 decode matvec row kernels
// (dot2_* where a build has them, else dot_*), as bench/ab/ab_attend_keys.cpp does for
// attention: a 16384 x 4096 matrix, one output row per call, two threads,
// old and new alternated 15 times. Built and run by scripts/ab_attend_keys.sh
// with AB=matvec.
//
// With ROWS=4 in the environment: four x rows per call (a batched decode),
// through dot4x2_* where a build has it, else dot4_* one weight row a call.
//
// q4: Q4_0 weights against q8_0 activations (dot_q4_q8 / dot4_q4_q8, one
// weight row a call), as a q4 model decodes.
//
// usage: ab_matvec f32|bf16|f16|q4 [avx2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#include "core/aligned_vector.h"
#include "kernels/simd/kernel_table.h"
namespace splitdec::simd { const KernelTable& old_avx512_table(); const KernelTable& new_avx512_table(); const KernelTable& old_avx2_table(); const KernelTable& new_avx2_table(); }
using namespace splitdec;
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s f32|bf16|f16|q4 [avx2]\n", argv[0]);
    return 2;
  }
  std::string ty = argv[1];
  const bool a2 = argc > 2 && std::string(argv[2]) == "avx2";
  const simd::KernelTable* T[2] = {a2 ? &simd::old_avx2_table() : &simd::old_avx512_table(), a2 ? &simd::new_avx2_table() : &simd::new_avx512_table()};
  // OUT / IN in the environment change the shape (default 16384 x 4096).
  const int out = std::getenv("OUT") ? std::atoi(std::getenv("OUT")) : 16384, in = std::getenv("IN") ? std::atoi(std::getenv("IN")) : 4096;
  const size_t n = size_t(out) * in;
  // Cache-line aligned, as the runtime's weights and activations are.
  AlignedVector<float> wf; AlignedVector<uint16_t> w16; AlignedVector<uint8_t> wq;
  if (ty == "f32") wf.assign(n, 0.01f);
  else if (ty == "q4") {
    const size_t row_bytes = size_t(in / 32) * 18;  // Q4_0: {f16 d, 16 bytes of nibbles} per 32 weights
    wq.assign(size_t(out) * row_bytes, 0x5a);
    for (size_t b = 0; b < wq.size(); b += 18) wq[b] = 0x00, wq[b + 1] = 0x3c;  // d = 1
  } else w16.assign(n, 0x3c00);
  const size_t q4_row = size_t(in / 32) * 18;
  std::vector<float> xscale(size_t(4) * (in / 32), 0.01f);
  std::vector<int8_t> xq(size_t(4) * in, 37);
  const std::string rows_env = std::getenv("ROWS") ? std::getenv("ROWS") : "1";
  if (rows_env != "1" && rows_env != "4") {
    std::fprintf(stderr, "ROWS must be 1 or 4, not %s\n", rows_env.c_str());
    return 2;
  }
  const bool four = rows_env == "4";
  AlignedVector<float> x(size_t(four ? 4 : 1) * in, 0.5f), y(size_t(four ? 4 : 1) * out);
  const float* xs[4] = {x.data(), x.data() + (four ? in : 0), x.data() + (four ? 2 * in : 0), x.data() + (four ? 3 * in : 0)};
  // Four rows: pairs through dot4x2 (across the range's halves, as linear()
  // runs a batched matvec) where the table has it, else dot4 per row.
  auto half4 = [&](const simd::KernelTable& t, int o0, int o1) {
    if (ty == "q4") {
      const float* s4[4] = {xscale.data(), xscale.data() + in / 32, xscale.data() + 2 * (in / 32), xscale.data() + 3 * (in / 32)};
      const int8_t* q4[4] = {xq.data(), xq.data() + in, xq.data() + 2 * in, xq.data() + 3 * in};
      float o4[4];
      for (int o = o0; o < o1; ++o) {
        t.dot4_q4_q8(s4, q4, wq.data() + size_t(o) * q4_row, in, o4);
        for (int r = 0; r < 4; ++r) y[size_t(r) * out + o] = o4[r];
      }
      return;
    }
    const bool pairs = ty == "f32" ? t.dot4x2_f32 != nullptr : ty == "bf16" ? t.dot4x2_bf16 != nullptr : t.dot4x2_f16 != nullptr;
    const int h = pairs ? (o1 - o0) / 2 : 0;
    float o8[8];
    for (int i = 0; i < h; ++i) {
      const int ra = o0 + i, rb = o0 + h + i;
      const size_t a = size_t(ra) * in, b = size_t(rb) * in;
      if (ty == "f32") t.dot4x2_f32(xs, wf.data() + a, wf.data() + b, in, o8);
      else if (ty == "bf16") t.dot4x2_bf16(xs, w16.data() + a, w16.data() + b, in, o8);
      else t.dot4x2_f16(xs, w16.data() + a, w16.data() + b, in, o8);
      for (int r = 0; r < 4; ++r) y[size_t(r) * out + ra] = o8[r], y[size_t(r) * out + rb] = o8[4 + r];
    }
    for (int o = o0 + 2 * h; o < o1; ++o) {
      const size_t a = size_t(o) * in;
      if (ty == "f32") t.dot4_f32(xs, wf.data() + a, in, o8);
      else if (ty == "bf16") t.dot4_bf16(xs, w16.data() + a, in, o8);
      else t.dot4_f16(xs, w16.data() + a, in, o8);
      for (int r = 0; r < 4; ++r) y[size_t(r) * out + o] = o8[r];
    }
  };
  // Output rows in pairs through dot2 where the table has it, row i of the
  // thread's range with row i of its second half (as linear() runs a
  // single-row matvec), else one dot per row.
  auto half = [&](const simd::KernelTable& t, int o0, int o1) {
    if (ty == "q4") {
      for (int o = o0; o < o1; ++o) y[o] = t.dot_q4_q8(xscale.data(), xq.data(), wq.data() + size_t(o) * q4_row, in);
      return;
    }
    const bool pairs = ty == "f32" ? t.dot2_f32 != nullptr : ty == "bf16" ? t.dot2_bf16 != nullptr : t.dot2_f16 != nullptr;
    const int h = pairs ? (o1 - o0) / 2 : 0;
    for (int i = 0; i < h; ++i) {
      const int ra = o0 + i, rb = o0 + h + i;
      const size_t a = size_t(ra) * in, b = size_t(rb) * in;
      float two[2];
      if (ty == "f32") t.dot2_f32(x.data(), wf.data() + a, wf.data() + b, in, two);
      else if (ty == "bf16") t.dot2_bf16(x.data(), w16.data() + a, w16.data() + b, in, two);
      else t.dot2_f16(x.data(), w16.data() + a, w16.data() + b, in, two);
      y[ra] = two[0], y[rb] = two[1];
    }
    for (int o = o0 + 2 * h; o < o1; ++o)
      y[o] = ty == "f32"    ? t.dot_f32(x.data(), wf.data() + size_t(o) * in, in)
             : ty == "bf16" ? t.dot_bf16(x.data(), w16.data() + size_t(o) * in, in)
                            : t.dot_f16(x.data(), w16.data() + size_t(o) * in, in);
  };
  auto run = [&](const simd::KernelTable& t) {
    auto t0 = std::chrono::steady_clock::now();
    if (four) {
      std::thread th(half4, std::cref(t), 0, out / 2);
      half4(t, out / 2, out);
      th.join();
    } else {
      std::thread th(half, std::cref(t), 0, out / 2);
      half(t, out / 2, out);
      th.join();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> tm[2];
  for (int it = 0; it < 15; ++it) for (int w = 0; w < 2; ++w) tm[w].push_back(run(*T[w]));
  for (auto& v : tm) std::sort(v.begin(), v.end());
  double bytes = ty == "q4" ? double(wq.size()) : double(n) * (ty == "f32" ? 4 : 2);
  printf("%s%s %s: old %.2f ms (%.1f GB/s) new %.2f ms (%.1f GB/s): new/old speed %.2fx\n", four ? "4 rows " : "", ty.c_str(), a2 ? "avx2" : "avx512", tm[0][7] * 1e3, bytes / tm[0][7] / 1e9, tm[1][7] * 1e3, bytes / tm[1][7] / 1e9, tm[0][7] / tm[1][7]);
}
