#include "core/zeroed_array.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define SPLITDEC_ZEROED_FROM_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPLITDEC_ZEROED_FROM_HEAP 1
#endif
#endif

namespace splitdec::zeroed_pages {

void* allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
#ifdef SPLITDEC_ZEROED_FROM_HEAP
  // Cache-line aligned, as the mapping would be (page aligned).
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
#else
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
#endif
}

void release(void* p, std::size_t bytes) noexcept {
  if (!p) return;
#ifdef SPLITDEC_ZEROED_FROM_HEAP
  (void)bytes;
  std::free(p);
#else
  ::munmap(p, bytes);
#endif
}

}  // namespace splitdec::zeroed_pages
