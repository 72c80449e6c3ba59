// Cache-line aligned storage for the rows the SIMD kernels stream: weights
// and the decoder's activations. malloc aligns large blocks to 16 bytes
// only, and a 64-byte load that straddles two cache lines costs two: with
// x rows off by 16 bytes the batched decode kernel (dot4x2) ran 1.36-1.41x
// slower from L2, the single-row one (dot2) 1.35x (docs/kernels.md).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

#include "core/zeroed_array.h"

namespace splitdec {

inline constexpr std::size_t kCacheLine = 64;

// kHugePages: blocks of 2 MiB or more are their own anonymous mappings on a
// 2 MiB boundary, offered to transparent huge pages (zeroed_pages): one
// fault per 2 MiB instead of per 4 KiB. Only for buffers written whole (the
// weights: loading a 1.6 GB Q4_K GGUF took 8.0-9.3 s, 5.8-6.9 s with them,
// a 1 GB Q8_0 one 6.6-8.6 s, 3.2-3.4 s; decode did not move): a scratch
// buffer sized for the largest chunk and touched in part would be resident
// in 2 MiB steps (peak RSS +10-18% on small models).
template <class T, bool kHugePages = false>
struct CacheLineAllocator {
  static constexpr bool huge(std::size_t bytes) { return kHugePages && bytes >= zeroed_pages::kHugePageBytes; }
  using value_type = T;
  template <class U>
  struct rebind {
    using other = CacheLineAllocator<U, kHugePages>;
  };
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U, kHugePages>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (huge(bytes)) return static_cast<T*>(zeroed_pages::allocate(bytes, true));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(kCacheLine)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (huge(n * sizeof(T))) return zeroed_pages::release(p, n * sizeof(T));
    ::operator delete(p, std::align_val_t(kCacheLine));
  }
  template <class U>
  bool operator==(const CacheLineAllocator<U, kHugePages>&) const noexcept {
    return true;
  }
};

// A std::vector whose data() is 64-byte aligned.
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;
// The same, on huge pages where large (buffers written whole: weights).
template <class T>
using HugePageVector = std::vector<T, CacheLineAllocator<T, true>>;

}  // namespace splitdec
