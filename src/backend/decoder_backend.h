// The seam between a session and the device that does its math. A session
// keeps the sequences' bookkeeping (slots, lengths, media blocks, the
// plan's routing and chunking); a backend holds the model's weights and the
// KV storage and runs one call: the rows of some sequences (tokens or media
// rows, with their RoPE positions and their chunk's block ids, from which
// the mask contract's masks are built) through every layer, attention over
// all sequences of the call included, to logits.
//
// Today's only backend is the CPU one (backend/cpu_backend.h). Where a GPU
// backend would go and what it implements: docs/architecture.md, "The
// backend seam".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kv/kv_store.h"
#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

enum class BackendKind { Cpu };

// One sequence of a call.
struct BackendSequence {
  int slot = 0;         // its KV slot
  int64_t first = 0;    // KV position of the call's first row (what the slot holds before it)
  int64_t start = 0;    // its first non-padding position (masks and GQA skip what is before)
  std::vector<int> blocks;  // per row of the call: media block id, 0-based within the call; -1 text
  // Its media rows of the call, [n, hidden] in order, where the caller holds
  // them (null: the call's input carries them in input->media, or none).
  const float* media = nullptr;
};

// One forward pass: `rows` rows of each sequence, all through the same path.
struct BackendCall {
  AttentionPath path = AttentionPath::Gqa;
  int rows = 0;
  std::vector<BackendSequence> sequences;
  // [sequences, rows]: tokens, modality, attention mask (media rows in
  // input->media, or in place: BackendSequence::media).
  const PromptBatch* input = nullptr;
  // [sequences * rows]: each row's RoPE position.
  const int64_t* positions = nullptr;
  // A decode step: each sequence's row is computed as it would be alone, so
  // a request's tokens do not depend on what else is in the batch.
  bool decode = false;
  enum class Logits { None, LastRow, AllRows } logits = Logits::LastRow;
};

class DecoderBackend {
 public:
  virtual ~DecoderBackend() = default;
  virtual const char* name() const = 0;
  virtual const Model& model() const = 0;

  // Runs the call and stores its K/V rows in the sequences' slots. Returns
  // [sequences, vocab] (LastRow), [sequences, rows, vocab] (AllRows) or
  // nothing. A call whose rows exceed what the store was sized for grows it
  // first (memory_for_call says by how much; the session checks it).
  virtual std::vector<float> forward(const BackendCall& call) = 0;

  // --- KV slots (kv/kv_store.h says what each promises) ---
  virtual void clear_slot(int slot) = 0;
  virtual void copy_slot(int from, int to) = 0;
  virtual void check_rewind(int slot, int64_t length, int64_t first_real) const = 0;
  virtual void rewind(int slot, int64_t length) = 0;
  virtual KvMemory memory() const = 0;
  // What the store would hold once a call of `rows` rows on `path` ran.
  virtual KvMemory memory_for_call(AttentionPath path, int rows) const = 0;
  // KV bytes allocated and copied since the last call (the session's trace).
  virtual KvTraffic take_traffic() = 0;
  // Benchmarks: positions [0, length) of an empty slot hold zero K/V, as a
  // prefilled text prompt would, without running the prefill. The caller
  // checks the slot and 1 <= length <= capacity first (bench/synthetic_past.cpp).
  virtual void fill_zero_past(int slot, int64_t length, AttentionPath path) = 0;
};

// The backend of `kind` over `model`, storing K/V in `store`; `layout` is the
// plan's choice of KV layout per path (pipeline/plan.h).
std::unique_ptr<DecoderBackend> make_decoder_backend(BackendKind kind, const Model& model, MaskPolicy policy,
                                                     KvLayout (*layout)(AttentionPath), std::unique_ptr<KvStore> store);

// Every backend this build has, by name (as SPLITDEC_BACKEND takes it).
std::vector<std::string> backend_names();
BackendKind parse_backend(const std::string& name);  // InputError listing the valid names
// The backend a session takes when its options name none: SPLITDEC_BACKEND
// when set (so a whole test run can target one backend), else the CPU.
BackendKind default_backend();

}  // namespace splitdec
