#include "pipeline/session.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/machine.h"
#include "mask/chunk_mask.h"
#include "pipeline/chunker.h"

namespace splitdec {

namespace {

// Refuses a KV cache larger than the machine's memory, before it is allocated.
void check_fits_memory(const KvMemory& m, const std::string& what, const std::string& remedy) {
  const uint64_t need = std::max(m.full_bytes, m.sliding_bytes) > UINT64_MAX / 2 ? UINT64_MAX : uint64_t(m.full_bytes) + m.sliding_bytes;
  const uint64_t have = physical_memory_bytes();
  if (have > 0 && need > have)
    throw CapacityError(what + " needs " + format_bytes(need) + ", more than this machine's " + format_bytes(have) +
                        " of memory (" + remedy + ")");
}

}  // namespace

Session::Session(const Model& model, int batch, SessionOptions options)
    : model_(model), batch_(batch), options_(std::move(options)) {
  const ModelConfig& c = model.config();
  if (options_.max_sequences == 0) options_.max_sequences = batch;
  if (batch < 0 || options_.max_sequences < 1) throw InputError("a session must hold at least one sequence");
  if (batch > options_.max_sequences)
    throw InputError("a batch of " + std::to_string(batch) + " sequences does not fit a session of " +
                     std::to_string(options_.max_sequences));
  if (options_.chunk < 1) throw InputError("chunk size must be at least 1, got " + std::to_string(options_.chunk));
  if (options_.capacity < 1) throw InputError("KV capacity must be at least 1, got " + std::to_string(options_.capacity));
  // Sizes are checked before anything that large is allocated.
  constexpr int64_t kMaxCapacity = int64_t(1) << 31;
  if (options_.capacity > kMaxCapacity)
    throw CapacityError("KV capacity of " + std::to_string(options_.capacity) + " positions is more than the limit of " +
                        std::to_string(kMaxCapacity) + " (--max-length, or --max-new-tokens that sizes it)");
  if (options_.max_sequences > 4096)
    throw CapacityError(std::to_string(options_.max_sequences) + " sequences are more than the limit of 4096");
  if (options_.chunk > (1 << 20)) throw InputError("chunk size " + std::to_string(options_.chunk) + " is more than 2^20");
  // Room for a chunk plus two images: staggered images in a batch can join chunks.
  if (options_.max_chunk == 0) {
    const int64_t max_chunk = int64_t(options_.chunk) + 2 * int64_t(c.mm_tokens_per_image);
    if (max_chunk > (int64_t(1) << 22))
      throw ConfigError("chunk + 2 x mm_tokens_per_image = " + std::to_string(max_chunk) + " positions is more than 2^22");
    options_.max_chunk = int(max_chunk);
  }
  if (options_.max_chunk < options_.chunk)
    throw InputError("max chunk " + std::to_string(options_.max_chunk) + " is smaller than the chunk size " + std::to_string(options_.chunk));
  for (const LayerSpec& l : c.layers)
    if (c.num_heads / l.num_kv_heads > 64) throw ConfigError("more than 64 query heads per KV head is not supported");
  policy_ = options_.policy.value_or(c.default_policy);
  plan_ = &plan_spec(options_.plan);
  const PlanSpec& plan = *plan_;
  const KvStoreShape shape{options_.max_sequences, options_.capacity, options_.max_chunk, options_.kv_dtype};
  check_fits_memory(plan.reserved(c, shape),
                    "a KV cache of " + std::to_string(options_.capacity) + " positions x " + std::to_string(options_.max_sequences) +
                        " sequences",
                    "lower --max-length, or --max-new-tokens that sizes it");
  backend_ = make_decoder_backend(options_.backend ? *options_.backend : default_backend(), model, policy_, plan.layout,
                                  plan.make_store(c, shape));
  seqs_.resize(size_t(options_.max_sequences));
  for (int b = 0; b < batch; ++b) seqs_[size_t(b)].live = true;
}

Session::~Session() = default;

KvMemory Session::memory() const { return backend_->memory(); }

int Session::open_sequence() {
  int pick = -1;
  for (size_t s = 0; s < seqs_.size(); ++s) {
    const Sequence& sq = seqs_[s];
    if (sq.live) continue;
    if (sq.length == 0) {  // holds nothing: nothing is lost
      pick = int(s);
      break;
    }
    if (pick < 0 || sq.closed_at < seqs_[size_t(pick)].closed_at) pick = int(s);
  }
  if (pick < 0) throw CapacityError("all " + std::to_string(seqs_.size()) + " sequence slots of the session are in use");
  backend_->clear_slot(pick);
  seqs_[size_t(pick)] = Sequence{};
  seqs_[size_t(pick)].live = true;
  return pick;
}

void Session::open_sequence(int seq) {
  if (seq < 0 || size_t(seq) >= seqs_.size())
    throw InputError("open_sequence: no slot " + std::to_string(seq) + " (the session has " + std::to_string(seqs_.size()) + ")");
  if (seqs_[size_t(seq)].live) throw InputError("open_sequence: slot " + std::to_string(seq) + " is in use");
  seqs_[size_t(seq)].live = true;
}

void Session::close_sequence(int seq) {
  check_sequences({seq}, 1, "close_sequence");
  seqs_[size_t(seq)].live = false;
  seqs_[size_t(seq)].closed_at = ++closes_;
}

void Session::copy_sequence(int from, int to) {
  check_sequences({from, to}, 2, "copy_sequence");
  backend_->copy_slot(from, to);
  const uint64_t closed_at = seqs_[size_t(to)].closed_at;
  seqs_[size_t(to)] = seqs_[size_t(from)];
  seqs_[size_t(to)].closed_at = closed_at;
}

bool Session::can_rewind(int seq, int64_t length) const {
  if (seq < 0 || size_t(seq) >= seqs_.size()) return false;
  try {
    check_rewind(seq, length);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool Session::live(int seq) const { return seq >= 0 && size_t(seq) < seqs_.size() && seqs_[size_t(seq)].live; }

int64_t Session::length(int seq) const {
  check_sequences({seq}, 1, "length");
  return seqs_[size_t(seq)].length;
}

std::vector<int> Session::first_sequences() const {
  std::vector<int> all(static_cast<size_t>(batch_));
  for (int b = 0; b < batch_; ++b) all[size_t(b)] = b;
  return all;
}

void Session::check_sequences(const std::vector<int>& seqs, size_t expected, const char* what) const {
  if (seqs.empty()) throw InputError(std::string(what) + ": no sequence given");
  if (seqs.size() != expected)
    throw InputError(std::string(what) + ": " + std::to_string(seqs.size()) + " sequences for " + std::to_string(expected) + " inputs");
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!live(seqs[i])) throw InputError(std::string(what) + ": sequence " + std::to_string(seqs[i]) + " is not open");
    if (std::find(seqs.begin(), seqs.begin() + long(i), seqs[i]) != seqs.begin() + long(i))
      throw InputError(std::string(what) + ": sequence " + std::to_string(seqs[i]) + " is given twice");
  }
}

void Session::validate_segment(const std::vector<int>& seqs, const PromptBatch& seg) const {
  if (seg.batch != int(seqs.size()))
    throw InputError("segment has " + std::to_string(seg.batch) + " sequences, the call " + std::to_string(seqs.size()));
  check_sequences(seqs, size_t(seg.batch), "append");
  validate_prompt_batch(seg, model_.config());
  for (int b = 0; b < seg.batch; ++b) {
    const Sequence& sq = seqs_[size_t(seqs[size_t(b)])];
    bool real_seen = false;
    for (int s = 0; s < seg.seq; ++s) {
      const bool pad = seg.attention_mask[size_t(b) * size_t(seg.seq) + size_t(s)] == 0;
      if (pad && (real_seen || sq.length > 0))
        throw InputError("sequence " + std::to_string(b) + " position " + std::to_string(sq.length + s) +
                         ": padding is only supported at the left of the first prompt");
      real_seen = real_seen || !pad;
    }
    if (!real_seen) throw InputError("sequence " + std::to_string(b) + " of the segment is all padding");
    if (sq.length + seg.seq > options_.capacity)
      throw CapacityError("a segment of " + std::to_string(seg.seq) + " tokens at position " + std::to_string(sq.length) +
                          " does not fit the KV capacity of " + std::to_string(options_.capacity) + " positions (" +
                          std::to_string(options_.capacity - sq.length) + " remain; raise --max-length)");
  }
}

void Session::check_append(const std::vector<int>& seqs, const PromptBatch& seg) const {
  validate_segment(seqs, seg);
  check_chunks(seqs, split_into_chunks(SegmentState(seg).blocks, options_.chunk));
}

// A chunk longer than the sliding rings were sized for (a media block is
// never cut, so a large image makes a long chunk) grows them before it runs
// (kv_cache.h says why a ring must hold the whole chunk plus the window).
// Only memory can refuse it, and that is checked here, before anything runs.
void Session::check_chunks(const std::vector<int>& seqs, const std::vector<ChunkSpan>& chunks) const {
  const bool bidirectional = policy_has_bidirectional_layer(policy_);
  KvMemory grown = backend_->memory();
  int rows = 0, at = 0;
  for (const ChunkSpan& ch : chunks) {
    const KvMemory m = backend_->memory_for_call(plan_->route(ch.media && bidirectional, false), ch.end - ch.begin);
    if (m.sliding_slots > grown.sliding_slots) grown = m, rows = ch.end - ch.begin, at = ch.begin;
  }
  if (rows == 0) return;
  check_fits_memory(grown,
                    "a chunk of " + std::to_string(rows) + " positions at position " +
                        std::to_string(seqs_[size_t(seqs[0])].length + at) + " (a media block is never cut) grows the " +
                        std::to_string(grown.sliding_layers) + " sliding-layer rings to " +
                        std::to_string(grown.sliding_slots) + " positions; the KV cache",
                    "lower --max-length, or pass --kv-dtype bf16 or q8");
}

std::vector<float> Session::append(const std::vector<int>& seqs, const PromptBatch& seg, bool all_positions) {
  validate_segment(seqs, seg);
  SegmentState state(seg);
  const std::vector<ChunkSpan> chunks = split_into_chunks(state.blocks, options_.chunk);
  check_chunks(seqs, chunks);
  for (int b = 0; b < seg.batch; ++b) {
    Sequence& sq = seqs_[size_t(seqs[size_t(b)])];
    if (sq.length > 0) continue;
    int64_t pads = 0;
    while (seg.attention_mask[size_t(b) * size_t(seg.seq) + size_t(pads)] == 0) ++pads;
    sq.start = pads;
  }
  const bool bidirectional = policy_has_bidirectional_layer(policy_);
  const int V = model_.config().vocab_size;
  // Every position's logits are gathered chunk by chunk; the last row's are
  // the last chunk's output as it is.
  std::vector<float> logits;
  if (all_positions) logits.resize(size_t(seg.batch) * size_t(seg.seq) * size_t(V));
  std::vector<int64_t> first;
  for (int seq : seqs) first.push_back(seqs_[size_t(seq)].length);
  for (const ChunkSpan& ch : chunks) {
    run_chunk(seqs, seg, state, ch.begin, ch.end, plan_->route(ch.media && bidirectional, false),
              TraceEntry::Prefill, all_positions, logits);
    if (options_.progress) options_.progress(ch.end, seg.seq);
  }
  if (bidirectional)
    for (size_t b = 0; b < seqs.size(); ++b)
      for (const KeyInterval& span : block_spans(state.blocks[b]))
        if (span.begin >= 0) seqs_[size_t(seqs[b])].media_blocks.push_back({first[b] + span.begin, first[b] + span.end});
  return logits;
}

std::vector<float> Session::decode(const std::vector<int>& seqs, const std::vector<int>& tokens) {
  check_sequences(seqs, tokens.size(), "decode");
  for (int seq : seqs) {
    const Sequence& sq = seqs_[size_t(seq)];
    if (sq.length == 0) throw InputError("decode before any prompt: append a prompt first");
    if (sq.length >= options_.capacity)
      throw CapacityError("KV capacity of " + std::to_string(options_.capacity) + " positions is exhausted (raise --max-length)");
  }
  const PromptBatch step = PromptBatch::text_column(tokens);
  validate_prompt_batch(step, model_.config());
  std::vector<float> logits;  // the step's output, moved in by run_chunk
  // A decode step's query is text: plain causal under every policy.
  SegmentState state(step);
  run_chunk(seqs, step, state, 0, 1, plan_->route(false, true), TraceEntry::Decode, false, logits);
  return logits;
}

Session::SegmentState::SegmentState(const PromptBatch& seg) {
  for (int b = 0; b < seg.batch; ++b) {
    blocks.push_back(seg.sequence_block_ids(b));
    next_media_row.push_back(seg.sequence_media_rows(b).first);
  }
}

void Session::run_chunk(const std::vector<int>& seqs, const PromptBatch& seg, SegmentState& state, int begin, int end,
                        AttentionPath path, TraceEntry::Kind kind, bool all_positions, std::vector<float>& logits) {
  const ModelConfig& c = model_.config();
  const int n = int(seqs.size()), rows = end - begin, H = c.hidden_size, V = c.vocab_size;
  const int64_t first = seqs_[size_t(seqs[0])].length;
  TraceEntry entry{kind, first, first + rows, path, 0, 0, n};

  // The call: the chunk's rows (tokens, media rows, positions) and each
  // sequence's slot, past length and chunk-local block ids.
  BackendCall call;
  call.path = path;
  call.rows = rows;
  call.decode = kind == TraceEntry::Decode;
  call.logits = all_positions ? BackendCall::Logits::AllRows
                : end == seg.seq ? BackendCall::Logits::LastRow
                                 : BackendCall::Logits::None;
  PromptBatch chunk;
  chunk.batch = n;
  chunk.seq = rows;
  std::vector<int64_t> positions, next_position(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    const Sequence& sq = seqs_[size_t(seqs[size_t(b)])];
    BackendSequence& call_seq = call.sequences.emplace_back(BackendSequence{seqs[size_t(b)], sq.length, sq.start, {}, nullptr});
    int64_t& next = next_position[size_t(b)];
    next = sq.rope_next;
    const std::vector<int>& seg_blocks = state.blocks[size_t(b)];
    // The chunk reads its media rows where the segment holds them.
    int64_t& media_row = state.next_media_row[size_t(b)];
    if (!seg.media.empty()) call_seq.media = seg.media.data() + size_t(media_row) * size_t(H);
    for (int s = begin; s < end; ++s) {
      const size_t r = size_t(b) * size_t(seg.seq) + size_t(s);
      chunk.tokens.push_back(seg.tokens[r]);
      chunk.modality.push_back(seg.modality[r]);
      chunk.attention_mask.push_back(seg.attention_mask[r]);
      call_seq.blocks.push_back(seg_blocks[size_t(s)]);
      positions.push_back(seg.attention_mask[r] ? next++ : 0);
      if (seg.modality[r] != Modality::Text) ++media_row;
    }
    // Chunk-local block ids, renumbered from 0 (a chunk holds whole blocks).
    int base = -1;
    for (int id : call_seq.blocks)
      if (id >= 0 && (base < 0 || id < base)) base = id;
    for (int& id : call_seq.blocks) id = id < 0 ? -1 : id - base;
  }
  call.input = &chunk;
  call.positions = positions.data();
  std::vector<float> out = backend_->forward(call);
  const KvTraffic traffic = backend_->take_traffic();
  entry.kv_bytes_allocated = traffic.allocated;
  entry.kv_bytes_copied = traffic.copied;
  for (int b = 0; b < n; ++b) {
    Sequence& sq = seqs_[size_t(seqs[size_t(b)])];
    sq.length += rows;
    sq.rope_next = next_position[size_t(b)];
  }
  // Logits: every row of the chunk in its place, or each sequence's last row.
  if (all_positions) {
    for (int b = 0; b < n; ++b)
      std::copy_n(out.data() + size_t(b) * size_t(rows) * size_t(V), size_t(rows) * size_t(V),
                  logits.data() + (size_t(b) * size_t(seg.seq) + size_t(begin)) * size_t(V));
  } else if (end == seg.seq) {
    logits = std::move(out);  // [n, vocab]: no copy on the decode path
  }
  if (options_.keep_trace) trace_.push_back(entry);
}

void Session::adopt_past(int seq, int64_t length) {
  check_sequences({seq}, 1, "adopt_past");
  if (seqs_[size_t(seq)].length != 0) throw InputError("adopt_past needs an empty sequence");
  if (length < 1 || length > options_.capacity)
    throw CapacityError("adopt_past: " + std::to_string(length) + " positions do not fit the capacity of " +
                        std::to_string(options_.capacity));
  Sequence& sq = seqs_[size_t(seq)];
  sq.length = sq.rope_next = length;
  sq.start = 0;
}

void Session::check_rewind(int seq, int64_t length) const {
  const Sequence& sq = seqs_[size_t(seq)];
  if (length < 0) throw InputError("cannot rewind to position " + std::to_string(length) + ": before the start");
  if (length > sq.length)
    throw InputError("cannot rewind to position " + std::to_string(length) + ": the session holds only " + std::to_string(sq.length));
  if (length > 0 && length < sq.start)
    throw InputError("cannot rewind to position " + std::to_string(length) + ": it cuts into the left padding of sequence " +
                     std::to_string(seq) + " (first token at " + std::to_string(sq.start) + "); rewind to 0 to start over");
  for (const KeyInterval& block : sq.media_blocks)
    if (block.begin < length && length < block.end)
      throw InputError("cannot rewind to position " + std::to_string(length) + ": it cuts the media block at positions [" +
                       std::to_string(block.begin) + ", " + std::to_string(block.end) +
                       ") whose positions attended to each other; rewind to " + std::to_string(block.begin) + " or " +
                       std::to_string(block.end));
  if (length > 0) backend_->check_rewind(seq, length, sq.start);
}

void Session::rewind(int seq, int64_t length) {
  check_sequences({seq}, 1, "rewind");
  check_rewind(seq, length);
  Sequence& sq = seqs_[size_t(seq)];
  backend_->rewind(seq, length);
  sq.length = length;
  std::erase_if(sq.media_blocks, [&](const KeyInterval& b) { return b.begin >= length; });
  if (length == 0) sq.start = 0;
  sq.rope_next = std::max<int64_t>(0, length - sq.start);
}

// --- Lockstep ---

std::vector<float> Session::append(const PromptBatch& seg, bool all_positions) { return append(first_sequences(), seg, all_positions); }

std::vector<float> Session::decode(const std::vector<int>& tokens) {
  if (int(tokens.size()) != batch_)
    throw InputError("decode needs one token per sequence (" + std::to_string(batch_) + "), got " + std::to_string(tokens.size()));
  return decode(first_sequences(), tokens);
}

void Session::rewind(int64_t length) {
  check_sequences(first_sequences(), size_t(batch_), "rewind");
  for (int b = 0; b < batch_; ++b) check_rewind(b, length);  // every sequence before any changes
  for (int b = 0; b < batch_; ++b) rewind(b, length);
}

int64_t Session::length() const { return batch_ > 0 ? seqs_[0].length : 0; }

}  // namespace splitdec
