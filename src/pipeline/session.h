// A decoding session: runs a model incrementally over a KV store under one
// execution plan. Prompt segments are cut into chunks that never split a
// media block and routed to the masked or the GQA path (plan `split`), or
// to the dense-bias path (`single`), or to one mask-aware kernel
// (`unified`). Every chunk and step is recorded in a trace.
//
// A session holds up to `max_sequences` sequences, each in its own KV slot
// with its own length: a prefill or a decode step takes any subset of the
// live sequences (their linear layers run as one batch; attention runs per
// sequence on its slot). Slots are reused once a sequence is closed: a
// closed slot keeps its KV (positions, media blocks) until it is opened
// empty, so a server can reopen it and continue from a prefix of what it
// held (a prefix cache across requests: rewind to the shared prefix, then
// append the rest). The lockstep calls (append(segment), decode(tokens),
// rewind(length)) act on the first `batch` sequences, opened by the
// constructor, for callers that move a left-padded batch together.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/decoder_backend.h"
#include "kv/kv_store.h"
#include "model/gemma_model.h"
#include "model/prompt_batch.h"
#include "pipeline/chunker.h"
#include "pipeline/plan.h"

namespace splitdec {

struct SessionOptions {
  Plan plan = Plan::Split;
  int64_t capacity = 4096;  // maximum length of one sequence, padding included
  int chunk = 256;          // prefill chunk size
  int max_chunk = 0;        // chunk the sliding rings are first sized for; 0: chunk + 2 * mm_tokens_per_image.
                            // A longer chunk (a media block is never cut) grows them once, at its prefill.
  int max_sequences = 0;    // KV slots; 0: the constructor's batch
  std::optional<MaskPolicy> policy;  // default: the model family's
  DType kv_dtype = DType::F32;       // storage of the shared KV buffer: F32, BF16, F16 or I8 (q8, kv/kv_rows.h)
  bool keep_trace = true;            // false: trace() stays empty (a long chat keeps no entry per token)
  std::optional<BackendKind> backend;  // default: default_backend() (SPLITDEC_BACKEND, else the CPU)
  // Called after each prefill chunk with (positions done, positions in the segment).
  std::function<void(int64_t, int64_t)> progress;
};

struct TraceEntry {
  enum Kind { Prefill, Decode } kind = Prefill;
  int64_t begin = 0, end = 0;  // positions (of the first sequence in the call)
  AttentionPath path = AttentionPath::Gqa;
  int64_t kv_bytes_allocated = 0;
  int64_t kv_bytes_copied = 0;
  int sequences = 1;  // sequences that ran together
};

class Session {
 public:
  // Opens sequences 0 .. batch-1 (batch may be 0 when max_sequences is set).
  Session(const Model& model, int batch, SessionOptions options);
  ~Session();

  // --- Per sequence ---
  // A free slot, now live and empty: one that holds nothing, else the one
  // closed longest ago (what it held is dropped). CapacityError when every
  // slot is live.
  int open_sequence();
  // Reopens free slot `seq` with what it held when it was closed (its
  // length, KV and media blocks); rewind() then keeps a prefix of it.
  void open_sequence(int seq);
  // Frees the slot. Its KV stays until the slot is opened again: empty
  // (open_sequence()) or as it was (open_sequence(seq)).
  void close_sequence(int seq);
  // Live slot `to` takes what live slot `from` holds (length, KV, media
  // blocks) and both go on apart: a prompt prefilled once serves several
  // replies (a server's n > 1). Throws before changing anything.
  void copy_sequence(int from, int to);
  // Whether rewind(seq, length) would succeed, live slot or free one: false
  // where it cuts a bidirectional media block or a sliding ring no longer
  // holds the window before `length` (check_rewind says which).
  bool can_rewind(int seq, int64_t length) const;
  // Appends `segment` (one row per entry of `seqs`, in order) and prefills it.
  // Padding is only allowed at the left of a sequence's first segment.
  // Returns logits [n, vocab] of each sequence's last position, or
  // [n, seq, vocab] of every position when `all_positions`.
  std::vector<float> append(const std::vector<int>& seqs, const PromptBatch& segment, bool all_positions = false);
  // Throws what append() would throw for this segment; changes nothing.
  void check_append(const std::vector<int>& seqs, const PromptBatch& segment) const;
  // One decode step: one text token for each sequence of `seqs`. Returns [n, vocab].
  std::vector<float> decode(const std::vector<int>& seqs, const std::vector<int>& tokens);
  // Truncates one sequence to `length` positions. Throws before changing anything.
  void rewind(int seq, int64_t length);
  int64_t length(int seq) const;
  bool live(int seq) const;

  // --- Lockstep over sequences 0 .. batch-1 ---
  std::vector<float> append(const PromptBatch& segment, bool all_positions = false);
  std::vector<float> decode(const std::vector<int>& tokens);
  void rewind(int64_t length);
  int64_t length() const;  // of sequence 0
  int batch() const { return batch_; }

  // For a caller that stored positions [0, length) of empty live slot `seq`
  // itself, through backend() (benchmarks: bench/synthetic_past.h): the
  // slot now holds them as a text prompt without padding.
  void adopt_past(int seq, int64_t length);

  DecoderBackend& backend() { return *backend_; }
  const PlanSpec& plan() const { return *plan_; }
  const Model& model() const { return model_; }
  MaskPolicy policy() const { return policy_; }
  const SessionOptions& options() const { return options_; }
  const std::vector<TraceEntry>& trace() const { return trace_; }
  KvMemory memory() const;

 private:
  struct Sequence {
    bool live = false;
    int64_t length = 0;
    int64_t start = 0;      // first non-padding position
    int64_t rope_next = 0;  // next RoPE position
    // Bidirectional media blocks, absolute [begin, end): a rewind may not cut
    // one (its kept positions attended to the dropped ones).
    std::vector<KeyInterval> media_blocks;
    uint64_t closed_at = 0;  // close order (open_sequence() drops the oldest content first)
  };
  // What a segment's chunks share, computed once per segment: block ids per
  // sequence, and each sequence's next media row (chunks run in order).
  struct SegmentState {
    std::vector<std::vector<int>> blocks;
    std::vector<int64_t> next_media_row;
    explicit SegmentState(const PromptBatch& segment);
  };
  void check_sequences(const std::vector<int>& seqs, size_t expected, const char* what) const;
  void check_rewind(int seq, int64_t length) const;  // throws; changes nothing
  void check_chunks(const std::vector<int>& seqs, const std::vector<ChunkSpan>& chunks) const;
  void validate_segment(const std::vector<int>& seqs, const PromptBatch& segment) const;
  void run_chunk(const std::vector<int>& seqs, const PromptBatch& segment, SegmentState& state, int begin, int end,
                 AttentionPath path, TraceEntry::Kind kind, bool all_positions, std::vector<float>& logits);
  std::vector<int> first_sequences() const;

  const Model& model_;
  int batch_;
  SessionOptions options_;
  MaskPolicy policy_;
  const PlanSpec* plan_ = nullptr;  // the plan's row of the plan table
  std::unique_ptr<DecoderBackend> backend_;  // the weights' device and the KV slots
  std::vector<Sequence> seqs_;  // one per slot
  std::vector<TraceEntry> trace_;
  uint64_t closes_ = 0;
};

}  // namespace splitdec
