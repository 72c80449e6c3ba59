#include "core/zeroed_array.h"

#include <sys/mman.h>

#include <cstdint>
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

void* allocate(std::size_t bytes, [[maybe_unused]] bool huge_pages) {
  if (bytes == 0) return nullptr;
#ifdef SPLITDEC_ZEROED_FROM_HEAP
  // Cache-line aligned, as the mapping would be (page aligned).
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
#else
  // A huge-page block is mapped 2 MiB larger and trimmed to a 2 MiB boundary,
  // so the kernel can back it with whole huge pages. Its own mapping, not the
  // malloc heap: a heap range advised once would keep the advice for the
  // scratch buffers that reuse it later.
  const std::size_t slack = huge_pages ? kHugePageBytes : 0;
  if (bytes > std::size_t(-1) - slack) throw std::bad_alloc();
  void* mapped = ::mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  if (!huge_pages) return mapped;
  const auto start = reinterpret_cast<std::uintptr_t>(mapped);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const std::uintptr_t end = start + bytes + slack, used_end = aligned + bytes;
  const std::uintptr_t page = 4096, tail = (used_end + page - 1) / page * page;
  if (aligned > start) ::munmap(mapped, aligned - start);
  if (end > tail) ::munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
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
