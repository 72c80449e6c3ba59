// The `split-copy` plan's storage: the prefill stage keeps its own present
// (concat, as a separate prefill graph would) and decoding reads the shared
// in-place buffer. The layout a chunk reads is brought up to date first:
// the first decode step after a prefill copies the new positions into the
// shared buffer (the hand-off whose cost this plan exists to show), and a
// prefill after decoding first brings the decoded positions into its present.
#pragma once

#include <vector>

#include "kv/concat_kv.h"
#include "kv/kv_cache.h"

namespace splitdec {

class SplitCopyKv : public KvStore {
 public:
  SplitCopyKv(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype);

  void prepare(int seq, KvLayout layout, int64_t length) override;
  void write(int layer, int seq, KvLayout layout, int64_t first, int n, const float* k, const float* v) override;
  KvView view(int layer, int seq, KvLayout layout) const override;
  // The present keeps every position, so a rewind it covers always works.
  void check_rewind(int seq, int64_t length, int64_t first_real) const override;
  void rewind(int seq, int64_t length) override;
  void clear(int seq) override;
  void copy_sequence(int from, int to) override;
  KvMemory memory() const override { return shared_.memory(); }
  // Prefill chunks read the present, which holds every position: only a
  // chunk that reads the shared buffer can need larger rings.
  void fit_chunk(KvLayout layout, int rows) override {
    if (layout == KvLayout::Shared) shared_.fit_chunk(layout, rows);
  }
  KvMemory memory_for_chunk(KvLayout layout, int rows) const override {
    return layout == KvLayout::Shared ? shared_.memory_for_chunk(layout, rows) : memory();
  }
  KvTraffic take_traffic() override;

 private:
  const ModelConfig* config_;
  KvCache shared_;
  ConcatKv present_;
  bool present_covers(int seq, int64_t length, int64_t first_real) const;
  // Per sequence: positions [0, x) are current in the shared buffer / the
  // present; below present_zero_end the present may hold zeros (positions a
  // ring had dropped when the present took them over).
  std::vector<int64_t> shared_valid_, present_valid_, present_zero_end_;
};

}  // namespace splitdec
