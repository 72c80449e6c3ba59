// A decoding session: runs a model incrementally over a KV cache under one
// execution plan. Prompt segments are cut into chunks that never split a
// media block and routed to the masked or the GQA path (plan `split`), or
// to the dense-bias path (`single`), or to one mask-aware kernel
// (`unified`). Every chunk and step is recorded in a trace.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kv/concat_kv.h"
#include "kv/kv_cache.h"
#include "model/gemma_model.h"
#include "model/prompt_batch.h"
#include "pipeline/plan.h"

namespace splitdec {

struct SessionOptions {
  Plan plan = Plan::Split;
  int64_t capacity = 4096;  // maximum sequence length, padding included
  int chunk = 256;          // prefill chunk size
  int max_chunk = 0;        // largest chunk (a media block can grow one); 0: chunk + 2 * mm_tokens_per_image
  std::optional<MaskPolicy> policy;  // default: the model family's
  DType kv_dtype = DType::F32;       // storage of the shared KV buffer: F32, BF16 or F16
  // Called after each prefill chunk with (positions done, positions in the segment).
  std::function<void(int64_t, int64_t)> progress;
};

struct TraceEntry {
  enum Kind { Prefill, Decode } kind = Prefill;
  int64_t begin = 0, end = 0;  // positions
  AttentionPath path = AttentionPath::Gqa;
  int64_t kv_bytes_allocated = 0;
  int64_t kv_bytes_copied = 0;
};

class Session {
 public:
  Session(const Model& model, int batch, SessionOptions options);

  // Appends one segment to every sequence and prefills it. Padding is only
  // allowed at the left of the first segment. Returns logits
  // [batch, vocab] of the last position, or [batch, seq, vocab] of every
  // position when `all_positions`.
  std::vector<float> append(const PromptBatch& segment, bool all_positions = false);
  // One decode step: one text token per sequence. Returns [batch, vocab].
  std::vector<float> decode(const std::vector<int>& tokens);
  // Truncates every sequence to `length` positions.
  void rewind(int64_t length);
  // Benchmarks only: makes positions [0, length) the past of every sequence
  // as if a text prompt had been prefilled, with zero K/V, so decode cost
  // can be measured at long contexts without paying for the prefill.
  void fill_synthetic(int64_t length);

  int64_t length() const { return length_; }
  int batch() const { return batch_; }
  const Model& model() const { return model_; }
  MaskPolicy policy() const { return policy_; }
  const SessionOptions& options() const { return options_; }
  const std::vector<TraceEntry>& trace() const { return trace_; }
  KvMemory memory() const;

 private:
  friend class SessionAttention;
  void validate_segment(const PromptBatch& segment) const;
  // What a segment's chunks share, computed once per segment: block ids per
  // sequence, and each sequence's next media row (chunks run in order).
  struct SegmentState {
    std::vector<std::vector<int>> blocks;
    std::vector<int64_t> next_media_row;
    SegmentState(const PromptBatch& segment);
  };
  void run_chunk(const PromptBatch& segment, SegmentState& state, int begin, int end, AttentionPath path,
                 TraceEntry::Kind kind, bool all_positions, std::vector<float>& logits);
  size_t sync_for(AttentionPath path);

  const Model& model_;
  int batch_;
  SessionOptions options_;
  MaskPolicy policy_;
  std::optional<KvCache> cache_;   // every plan but single
  std::optional<ConcatKv> concat_;  // single, and split-copy's prefill stage
  int64_t length_ = 0;
  std::vector<int64_t> seq_start_;  // first non-padding position per sequence
  std::vector<int64_t> rope_next_;  // next RoPE position per sequence
  // split-copy: positions [0, x) are current in the shared buffer / the prefill present.
  int64_t cache_valid_ = 0, concat_valid_ = 0;
  std::vector<TraceEntry> trace_;
};

}  // namespace splitdec
