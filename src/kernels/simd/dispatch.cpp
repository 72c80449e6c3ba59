#include <cstdlib>
#include <cstring>

#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

namespace {
bool has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
}  // namespace

std::vector<const KernelTable*> available() {
  std::vector<const KernelTable*> t{&generic_table()};
  if (has_avx2()) t.push_back(&avx2_table());
  if (has_avx512()) t.push_back(&avx512_table());
  return t;
}

const KernelTable& best() {
  static const KernelTable* chosen = [] {
    const auto all = available();
    if (const char* want = std::getenv("SPLITDEC_SIMD"))
      for (const KernelTable* t : all)
        if (std::strcmp(t->name, want) == 0) return t;
    return all.back();
  }();
  return *chosen;
}

}  // namespace splitdec::simd
