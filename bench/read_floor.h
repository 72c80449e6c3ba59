#pragma once
// A plain read of byte streams: the floor a bandwidth-bound kernel is
// measured against. Shared by the bench and bench/ab.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace splitdec::bench {

// Reads [a, a + bytes) and [b, b + bytes) side by side, as a decode kernel
// reads K and V: 256-bit loads folded with an integer or (no float assists
// on any bit pattern), each stream prefetched 1 KiB ahead like the kernel.
// AVX2 is the binary's baseline, so the target attribute is always safe.
__attribute__((target("avx2"))) inline void read_streams(const char* a, const char* b, size_t bytes) {
  __m256i x = _mm256_setzero_si256(), y = _mm256_setzero_si256();
  // Prefetch addresses may pass the buffers' ends: formed as integers.
  const uintptr_t pa = reinterpret_cast<uintptr_t>(a) + 1024, pb = reinterpret_cast<uintptr_t>(b) + 1024;
  for (size_t o = 0; o + 32 <= bytes; o += 32) {
    if (o % 64 == 0)
      _mm_prefetch(reinterpret_cast<const char*>(pa + o), _MM_HINT_T0), _mm_prefetch(reinterpret_cast<const char*>(pb + o), _MM_HINT_T0);
    x = _mm256_or_si256(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + o)));
    y = _mm256_or_si256(y, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + o)));
  }
  const __m256i all = _mm256_or_si256(x, y);
  asm volatile("" : : "x"(all));  // the loads are needed; no shared sink to race on
}

}  // namespace splitdec::bench
