// The scalar Q4_0 row-group kernel (the reference the vector ones match bit
// for bit) and the choice of kernel per SIMD table.
#include "kernels/simd/q4_row_groups.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/dtype.h"

namespace splitdec::simd {

void q4_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < kQ4GroupRows; ++i) {
      float acc = 0;
      for (int b = 0; b < n / 32; ++b) {
        const uint8_t* block = group + int64_t(b) * kQ4GroupBlockBytes;
        const int8_t* xq = x[r].q + int64_t(b) * 32;
        int32_t sum = 0;
        for (int c = 0; c < 4; ++c)
          for (int k = 0; k < 4; ++k) {
            const uint8_t byte = block[32 + 64 * c + 4 * i + k];
            sum += int32_t(byte & 15) * xq[4 * c + k] + int32_t(byte >> 4) * xq[16 + 4 * c + k];
          }
        uint16_t d;
        std::memcpy(&d, block + 2 * i, 2);
        const float scale = f16_to_f32(d) * x[r].scale[b];
        acc = std::fma(scale, float(sum - x[r].eight_sum[b]), acc);
      }
      out[r * kQ4GroupRows + i] = acc;
    }
}

namespace {
const Q4GroupKernel kGeneric{"generic", q4_group_dot_generic};
const Q4GroupKernel kAvx2{"avx2", q4_group_dot_avx2};
const Q4GroupKernel kAvxVnni{"avx-vnni", q4_group_dot_avx_vnni};
const Q4GroupKernel kAvx512{"avx512", q4_group_dot_avx512};
const Q4GroupKernel kAvx512Vnni{"avx512-vnni", q4_group_dot_avx512_vnni};

// SPLITDEC_VNNI=0 keeps the maddubs kernels on a VNNI machine (to measure
// what a CPU without VNNI gets).
bool vnni_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("SPLITDEC_VNNI");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return allowed;
}
bool has_avx_vnni() { return __builtin_cpu_supports("avxvnni"); }
bool has_avx512_vnni() { return __builtin_cpu_supports("avx512vnni"); }
}  // namespace

const Q4GroupKernel& q4_group_kernel(const KernelTable& table) {
  if (std::strcmp(table.name, "avx512") == 0) return vnni_allowed() && has_avx512_vnni() ? kAvx512Vnni : kAvx512;
  if (std::strcmp(table.name, "avx2") == 0) return vnni_allowed() && has_avx_vnni() ? kAvxVnni : kAvx2;
  return kGeneric;
}

std::vector<const Q4GroupKernel*> q4_group_kernels_available() {
  std::vector<const Q4GroupKernel*> all{&kGeneric};
  for (const KernelTable* t : available()) {
    if (std::strcmp(t->name, "avx2") == 0) {
      all.push_back(&kAvx2);
      if (has_avx_vnni()) all.push_back(&kAvxVnni);
    }
    if (std::strcmp(t->name, "avx512") == 0) {
      all.push_back(&kAvx512);
      if (has_avx512_vnni()) all.push_back(&kAvx512Vnni);
    }
  }
  return all;
}

}  // namespace splitdec::simd
