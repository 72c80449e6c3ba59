// What a session asks of KV storage, and nothing more: store a sequence's
// new K/V rows, show a layer's K/V to an attention kernel, truncate a
// sequence (under the store's own retention rules), free a sequence's slot.
// The session decides which layout a chunk reads (its plan's router); the
// store decides how rows are kept, what a rewind may reach, and what a
// hand-off between layouts copies.
//
// Sequences are slots 0..sequences-1, each with its own length. A slot is
// reused once cleared. Every view is of one sequence (KvView::batch == 1).
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace splitdec {

// The two KV layouts a plan can read:
//  - Shared: one pre-allocated in-place buffer per layer (rings on sliding
//    layers), written at the current position; every fast path reads it.
//  - Present: present = concat(past, new), a fresh buffer per call, as a
//    static exported graph without a shared buffer has it.
enum class KvLayout { Shared, Present };

struct KvMemory {
  int sliding_layers = 0, full_layers = 0, shared_layers = 0;
  int64_t sliding_slots = 0, full_slots = 0;
  size_t sliding_bytes = 0, full_bytes = 0;
};

// Bytes the store allocated or copied (the trace reports them per chunk).
struct KvTraffic {
  int64_t allocated = 0, copied = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Before a chunk or step of `seq` that reads `layout` with positions
  // [0, length) as its past: brings that layout up to date (a hand-off copy).
  virtual void prepare(int seq, KvLayout layout, int64_t length) = 0;
  // Stores K/V rows [n, kv_heads, head_dim] of `seq` at positions [first, first + n).
  virtual void write(int layer, int seq, KvLayout layout, int64_t first, int n, const float* k, const float* v) = 0;
  // The K/V `layer` reads for `seq` (its kv_source's buffer on a KV-shared layer).
  virtual KvView view(int layer, int seq, KvLayout layout) const = 0;
  // Throws CapacityError naming the layer and position when `seq` can no
  // longer be truncated to `length` (a ring dropped what the window needs);
  // `first_real` is the sequence's first non-padding position. Changes nothing.
  virtual void check_rewind(int seq, int64_t length, int64_t first_real) const = 0;
  // Before a prefill chunk of `rows` queries that reads `layout`: makes room
  // for the chunk's keys plus the window before them. A store with sliding
  // rings grows them when the chunk is longer than they were sized for (a
  // long media block); the allocation and the copy of what the rings hold
  // show up in take_traffic(). Decode steps (one row) never grow anything.
  virtual void fit_chunk(KvLayout, int /*rows*/) {}
  // What the store would hold after fit_chunk(layout, rows); allocates nothing.
  virtual KvMemory memory_for_chunk(KvLayout, int /*rows*/) const { return memory(); }
  // Truncates `seq` to `length` positions; check_rewind first.
  virtual void rewind(int seq, int64_t length) = 0;
  // Forgets `seq`: the slot starts empty for the next sequence.
  virtual void clear(int seq) = 0;
  // Makes slot `to` hold what slot `from` holds (every layer, every layout,
  // and what a rewind may still reach), so both go on from there apart: a
  // prompt prefilled once serves several replies. The copy shows up in
  // take_traffic(). Throws (an allocation) before changing anything.
  virtual void copy_sequence(int from, int to) = 0;
  virtual KvMemory memory() const = 0;

  // Bytes allocated and copied since the last call.
  virtual KvTraffic take_traffic() {
    const KvTraffic t = traffic_;
    traffic_ = {};
    return t;
  }

 protected:
  KvTraffic traffic_;
};

}  // namespace splitdec
