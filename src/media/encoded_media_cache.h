// Encoded media by content. An OpenAI client sends a conversation's image
// again with every turn; the same bytes with the same options give the same
// rows, so they are encoded once. A hit compares the whole bytes, never a
// hash alone (clients are untrusted: a crafted collision must not hand one
// request another's image). Least recently used entries go first once the
// byte budget (the keys' bytes plus the rows) is spent. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "io/media_embeddings.h"

namespace splitdec {

class EncodedMediaCache {
 public:
  explicit EncodedMediaCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // `key`: everything the rows depend on (MediaLoader builds it: the kind,
  // the image options and the file's bytes).
  std::optional<MediaEmbeddings> find(const std::string& key);
  // An entry larger than the whole budget is not kept.
  void insert(const std::string& key, const MediaEmbeddings& rows);

  struct Stats {
    int64_t hits = 0, misses = 0, evictions = 0, entries = 0, bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    MediaEmbeddings rows;
    size_t bytes() const { return key.size() + rows.data.size() * sizeof(float); }
  };
  mutable std::mutex m_;
  const size_t budget_;
  size_t used_ = 0;
  std::list<Entry> lru_;  // most recent first
  // By a hash of the key; equal hashes are told apart by the whole key.
  std::unordered_multimap<size_t, std::list<Entry>::iterator> index_;
  Stats stats_;
};

}  // namespace splitdec
