// Cache-line aligned storage for the rows the SIMD kernels stream: weights
// and the decoder's activations. malloc aligns large blocks to 16 bytes
// only, and a 64-byte load that straddles two cache lines costs two: with
// x rows off by 16 bytes the batched decode kernel (dot4x2) ran 1.36-1.41x
// slower from L2, the single-row one (dot2) 1.35x (docs/kernels.md).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace splitdec {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine)));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

// A std::vector whose data() is 64-byte aligned.
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace splitdec
