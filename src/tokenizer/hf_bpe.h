// The BPE model of a Hugging Face tokenizer.json, with HF's semantics: a
// word is split into Unicode scalars (byte pieces <0xXX> for scalars outside
// the vocab when byte_fallback is on), then the adjacent pair with the lowest
// merge rank is merged until none is left (leftmost first on equal rank).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace splitdec::hf {

class Bpe {
 public:
  struct Options {
    bool byte_fallback = false;
    bool fuse_unk = false;
    bool ignore_merges = false;
    int unk_id = -1;  // -1: no unk token; a scalar with no piece is then an error
  };
  // `vocab` maps piece -> id; `merges` are (left, right) in rank order. A
  // merge naming a piece outside the vocab throws FormatError (from `source`).
  Bpe(std::unordered_map<std::string, int> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      Options options, const std::string& source);
  ~Bpe();

  // Appends the ids of one pre-tokenized word to `out`.
  void encode_word(std::string_view word, std::vector<int>* out) const;
  const std::unordered_map<std::string, int>& vocab() const { return vocab_; }

 private:
  // Open addressing over (left id, right id): the hot lookup of the merge loop.
  struct MergeSlot {
    uint64_t key = ~uint64_t{0};
    int rank = 0;
    int new_id = 0;
  };
  const MergeSlot* find_merge(int left, int right) const;
  void merge_word(std::string_view word, std::vector<int>* out) const;
  int scalar_id(uint32_t cp, std::string_view text) const;

  std::unordered_map<std::string, int> vocab_;
  Options options_;
  std::vector<MergeSlot> merges_;
  uint64_t mask_ = 0;
  std::vector<int> bmp_ids_;                     // scalar < 0x10000 -> id, -1 when not a piece
  std::unordered_map<uint32_t, int> astral_ids_;  // the rest
  int byte_ids_[256];
  // Words repeat (a per-process cache as in HF); short words only, and
  // cleared when full so that memory stays bounded.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace splitdec::hf
