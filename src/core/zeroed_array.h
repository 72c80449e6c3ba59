// A fixed-size array that starts as zeros without touching its memory: the
// pages come from the kernel (an anonymous mapping) and are faulted in on
// first write. A KV buffer sized for the whole capacity then costs resident
// memory (and start-up time) only for the positions a run writes; zeroing
// it up front made the whole capacity resident at once (a short run spent
// a fifth of its time in memset). Page-aligned, so cache-line aligned too.
// Under AddressSanitizer it is a zeroed, cache-line aligned heap block,
// which ASan guards.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace splitdec {

namespace zeroed_pages {
inline constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;  // x86-64's transparent huge page
// std::bad_alloc when the kernel refuses. huge_pages: kHugePageBytes aligned
// and offered to transparent huge pages (for buffers written whole).
void* allocate(std::size_t bytes, bool huge_pages = false);
void release(void* p, std::size_t bytes) noexcept;
}  // namespace zeroed_pages

template <class T>
class ZeroedArray {
 public:
  ZeroedArray() = default;
  explicit ZeroedArray(std::size_t n) : n_(n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    p_ = static_cast<T*>(zeroed_pages::allocate(n * sizeof(T)));
  }
  ZeroedArray(ZeroedArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    if (this != &o) {
      zeroed_pages::release(p_, n_ * sizeof(T));
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  ~ZeroedArray() { zeroed_pages::release(p_, n_ * sizeof(T)); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace splitdec
