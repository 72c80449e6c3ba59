#include "media/encoded_media_cache.h"

#include <functional>

namespace splitdec {

std::optional<MediaEmbeddings> EncodedMediaCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(m_);
  const auto [begin, end] = index_.equal_range(std::hash<std::string>{}(key));
  for (auto it = begin; it != end; ++it) {
    if (it->second->key != key) continue;
    lru_.splice(lru_.begin(), lru_, it->second);
    ++stats_.hits;
    return it->second->rows;
  }
  ++stats_.misses;
  return std::nullopt;
}

void EncodedMediaCache::insert(const std::string& key, const MediaEmbeddings& rows) {
  Entry fresh{key, rows};
  const size_t bytes = fresh.bytes();
  if (bytes > budget_) return;
  std::lock_guard<std::mutex> lock(m_);
  const size_t h = std::hash<std::string>{}(key);
  const auto [begin, end] = index_.equal_range(h);
  for (auto it = begin; it != end; ++it)
    if (it->second->key == key) return;  // another request encoded it meanwhile
  while (used_ + bytes > budget_ && !lru_.empty()) {
    const Entry& last = lru_.back();
    const auto [b, e] = index_.equal_range(std::hash<std::string>{}(last.key));
    for (auto it = b; it != e; ++it)
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    used_ -= last.bytes();
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front(std::move(fresh));
  index_.emplace(h, lru_.begin());
  used_ += bytes;
}

EncodedMediaCache::Stats EncodedMediaCache::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  Stats s = stats_;
  s.entries = int64_t(lru_.size());
  s.bytes = int64_t(used_);
  return s;
}

}  // namespace splitdec
