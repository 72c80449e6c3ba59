// The shared KV cache: one buffer per layer that owns K/V, allocated once
// when a session starts, laid out [sequence slot, kv_heads, slots, head_dim].
// Both the masked prefill path and the GQA path read and write it in place,
// so handing a prompt over to decoding copies nothing.
//
// Full layers hold `capacity` positions per sequence. Sliding layers hold a
// ring of window + max_chunk positions (capacity, if that is smaller), where
// max_chunk is the longest chunk of queries seen so far. Why that many:
//  - a media block's queries attend to each other in both directions, so a
//    block is never cut across chunks: every query of the block must run
//    in one chunk, after the K/V of all of them are written (each layer's
//    K/V depends on the previous layer's attention over the whole block);
//  - so a chunk of n queries writes n positions, then its first query still
//    needs the window - 1 positions before it: n + window - 1 slots must be
//    live at once, and a smaller ring would overwrite keys it reads.
// A chunk longer than the rings were sized for (a large image, or staggered
// images of a batch joining one chunk) grows them once, before it runs:
// fit_chunk() re-lays the held positions into larger rings. Growth happens
// at a prefill only; decode steps never allocate. KV-shared layers (Gemma-4)
// own no buffer. Storage is f32, bf16, f16 or q8 (DType::I8: int8 rows with
// one f32 scale each, kv/kv_rows.h); the kernels read each.
#pragma once

#include <cstdint>
#include <vector>

#include "core/zeroed_array.h"
#include "core/dtype.h"
#include "io/model_config.h"
#include "kv/kv_store.h"

namespace splitdec {

class KvCache : public KvStore {
 public:
  // dtype: F32, BF16, F16 (16-bit: half the bytes; rounded to nearest even
  // on write) or I8 (q8: a little over a quarter of f32's bytes).
  KvCache(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype = DType::F32);
  // What a cache of these dimensions holds, without allocating it.
  static KvMemory plan(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype = DType::F32);

  // KvStore: the layout argument is ignored (this store has one).
  void prepare(int, KvLayout, int64_t) override {}
  void write(int layer, int seq, KvLayout, int64_t first, int n, const float* k, const float* v) override;
  KvView view(int layer, int seq, KvLayout = KvLayout::Shared) const override;
  void check_rewind(int seq, int64_t length, int64_t first_real) const override;
  void rewind(int seq, int64_t length) override;
  void clear(int seq) override;
  void copy_sequence(int from, int to) override;
  KvMemory memory() const override;
  // Grows the rings to window + rows when rows is more than max_chunk().
  void fit_chunk(KvLayout, int rows) override;
  KvMemory memory_for_chunk(KvLayout, int rows) const override;
  // The longest chunk the rings hold with its window.
  int max_chunk() const { return max_chunk_; }

  // Copies positions [from, to) of `seq` out of `src` (any layout, one sequence). Returns bytes copied.
  size_t copy_from(int layer, int seq, const KvView& src, int64_t from, int64_t to);
  // The oldest position of `seq` every ring still holds (0 when no ring dropped any).
  int64_t oldest_held(int seq) const { return oldest_[size_t(seq)]; }
  // Positions [0, end) of `seq` have been written (its length, as far as the cache knows).
  int64_t end(int seq) const { return end_[size_t(seq)]; }
  // The oldest position a sliding ring must hold for queries after
  // position `length` (`length` itself when no layer has a ring).
  int64_t first_needed(int64_t length, int64_t first_real) const;

 private:
  struct Buffer {
    int64_t slots = 0;
    bool ring = false;
    // Zero pages until written (resident memory follows use, not capacity);
    // page aligned, so rows of a multiple of 64 bytes start on a cache line.
    ZeroedArray<float> k, v;         // f32 storage
    ZeroedArray<uint16_t> k16, v16;  // 16-bit storage
    ZeroedArray<int8_t> k8, v8;      // q8 storage and its per-row scales
    ZeroedArray<float> ks, vs;
  };
  bool owns(int layer) const { return config_->layers[size_t(layer)].kv_source == layer; }
  void allocate(Buffer& buf, const LayerSpec& s, int64_t slots);
  void store_row(Buffer& buf, size_t dst, const float* k, const float* v, int hd);
  void copy_row(const Buffer& from, size_t src, Buffer& to, size_t dst, size_t hd) const;
  void note_written(int seq, int64_t first, int64_t end);
  const ModelConfig* config_;
  int sequences_;
  int64_t capacity_;
  int max_chunk_;
  DType dtype_;
  int64_t ring_slots_ = 0;       // slots of the smallest ring (0: no layer has one)
  std::vector<Buffer> buffers_;  // indexed by layer; empty for KV-shared layers
  std::vector<int64_t> end_, oldest_;  // per sequence
};

// Slots of a sliding layer's ring (or capacity when the ring would not be smaller).
int64_t sliding_slots(int window, int64_t capacity, int max_chunk);

}  // namespace splitdec
