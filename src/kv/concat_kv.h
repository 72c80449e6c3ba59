// Separate past and present, as a static exported graph without a shared
// buffer has them: every call produces present = concat(past, new) in a new
// buffer and copies the whole past into it. The `single` plan runs on this
// on purpose, to measure that cost; `split-copy` uses it for its prefill
// stage. Buffers are recycled the way a runtime's arena allocator would
// (the previous present becomes the spare), so what is measured is the
// copy, not page faults. A write counts its present as allocated and
// copied; a hand-off append as copied. Rows are kept as f32 but rounded
// through the session's KV storage type (kv/kv_rows.h), so that this plan
// attends over the values the shared buffer of the others holds.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"
#include "kv/kv_store.h"

namespace splitdec {

class ConcatKv : public KvStore {
 public:
  ConcatKv(const ModelConfig& config, int sequences, DType storage = DType::F32);

  // KvStore: the layout argument is ignored (this store has one). write()
  // makes present = concat(past, new rows): `first` must be the
  // present's length (the session rewinds before it writes elsewhere).
  void prepare(int, KvLayout, int64_t) override {}
  void write(int layer, int seq, KvLayout, int64_t first, int n, const float* k, const float* v) override;
  KvView view(int layer, int seq, KvLayout = KvLayout::Present) const override;
  void check_rewind(int, int64_t, int64_t) const override {}  // keeps every position
  void rewind(int seq, int64_t length) override;
  void clear(int seq) override { rewind(seq, 0); }
  void copy_sequence(int from, int to) override;
  KvMemory memory() const override { return {}; }  // nothing pre-allocated

  // Appends positions [length(seq), to) taken from another view (a hand-off
  // copy); positions that view no longer holds (a ring dropped them) are zero.
  void append_from(int layer, int seq, const KvView& src, int64_t to);
  int64_t length(int layer, int seq) const { return at(layer, seq).length; }

 private:
  // An uninitialised float buffer that remembers its capacity.
  struct Block {
    std::unique_ptr<float[]> data;
    size_t capacity = 0;
    void reserve(size_t n);
  };
  struct Present {
    int64_t length = 0;
    Block k, v, spare_k, spare_v;
  };
  Present& at(int layer, int seq) { return presents_[size_t(seq) * size_t(config_->num_layers) + size_t(layer)]; }
  const Present& at(int layer, int seq) const {
    return presents_[size_t(seq) * size_t(config_->num_layers) + size_t(layer)];
  }
  size_t grow(int layer, int seq, int n);  // returns the bytes of the new present
  const ModelConfig* config_;
  DType storage_;
  std::vector<Present> presents_;  // [sequence][layer]
};

}  // namespace splitdec
