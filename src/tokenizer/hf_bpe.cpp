#include "tokenizer/hf_bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "core/error.h"
#include "tokenizer/hf_utf8.h"

namespace splitdec::hf {

namespace {

constexpr size_t kMaxCachedWord = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t slot_of(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, int> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
         Options options, const std::string& source)
    : vocab_(std::move(vocab)), options_(options), bmp_ids_(0x10000, -1) {
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  merges_.resize(capacity);
  mask_ = capacity - 1;
  auto id_of = [&](const std::string& piece) {
    const auto it = vocab_.find(piece);
    if (it == vocab_.end()) throw FormatError(source + ": model.merges names \"" + piece + "\", which is not in model.vocab");
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const uint64_t key = pair_key(id_of(a), id_of(b));
    const int new_id = id_of(a + b);
    uint64_t s = slot_of(key) & mask_;
    while (merges_[s].key != ~uint64_t{0} && merges_[s].key != key) s = (s + 1) & mask_;
    // A repeated pair keeps its last rank, as HF's HashMap collect does.
    merges_[s] = {key, static_cast<int>(rank), new_id};
  }
  for (const auto& [piece, id] : vocab_) {
    size_t len = 0;
    if (piece.empty()) continue;
    const uint32_t cp = utf8_decode(piece, 0, &len);
    if (len != piece.size()) continue;
    if (cp < 0x10000) bmp_ids_[cp] = id;
    else astral_ids_[cp] = id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = vocab_.find(name);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

Bpe::~Bpe() = default;

const Bpe::MergeSlot* Bpe::find_merge(int left, int right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t s = slot_of(key) & mask_;; s = (s + 1) & mask_) {
    if (merges_[s].key == key) return &merges_[s];
    if (merges_[s].key == ~uint64_t{0}) return nullptr;
  }
}

int Bpe::scalar_id(uint32_t cp, std::string_view text) const {
  // A malformed byte decodes as itself: it is no scalar, so it takes the byte fallback.
  if (text.size() == 1 && cp >= 0x80) return -1;
  if (cp < 0x10000) return bmp_ids_[cp];
  const auto it = astral_ids_.find(cp);
  return it == astral_ids_.end() ? -1 : it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() >= kMaxCachedWord) return merge_word(word, out);
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out->size();
  merge_word(word, out);
  std::vector<int> ids(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void Bpe::merge_word(std::string_view word, std::vector<int>* out) const {
  struct Symbol {
    int id;
    int prev;
    int next;
    bool live;
  };
  struct Candidate {
    int rank;
    int pos;
    int new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap_storage;
  symbols.clear();
  bool last_unk = false;
  auto add = [&](int id) {
    const int n = static_cast<int>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  for (size_t i = 0; i < word.size();) {
    size_t len = 0;
    const uint32_t cp = utf8_decode(word, i, &len);
    const int id = scalar_id(cp, word.substr(i, len));
    if (id >= 0) {
      add(id);
      last_unk = false;
    } else {
      bool bytes_ok = options_.byte_fallback;
      for (size_t k = 0; bytes_ok && k < len; ++k) bytes_ok = byte_ids_[static_cast<unsigned char>(word[i + k])] >= 0;
      if (bytes_ok) {
        for (size_t k = 0; k < len; ++k) add(byte_ids_[static_cast<unsigned char>(word[i + k])]);
        last_unk = false;
      } else {
        if (options_.unk_id < 0)
          throw InputError("tokenizer: a character has no piece, no byte fallback and no unk token");
        // fuse_unk: a run of unknown scalars is one unk.
        if (!(options_.fuse_unk && last_unk)) add(options_.unk_id);
        last_unk = true;
      }
    }
    i += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // A min-heap on (rank, position) over a reused buffer.
  auto& queue = heap_storage;
  queue.clear();
  const auto later = std::greater<Candidate>();
  auto push = [&](Candidate c) {
    queue.push_back(c);
    std::push_heap(queue.begin(), queue.end(), later);
  };
  for (int p = 0; p + 1 < static_cast<int>(symbols.size()); ++p)
    if (const MergeSlot* m = find_merge(symbols[p].id, symbols[p + 1].id)) push({m->rank, p, m->new_id});
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const Candidate top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    const Symbol right = symbols[left.next];
    // Skip entries made stale by an earlier merge on either side.
    const MergeSlot* m = find_merge(left.id, right.id);
    if (!m || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    symbols[left.next].live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0)
      if (const MergeSlot* p = find_merge(symbols[left.prev].id, left.id)) push({p->rank, left.prev, p->new_id});
    if (left.next >= 0)
      if (const MergeSlot* n = find_merge(left.id, symbols[left.next].id)) push({n->rank, top.pos, n->new_id});
  }
  for (const Symbol& s : symbols)
    if (s.live) out->push_back(s.id);
}

}  // namespace splitdec::hf
