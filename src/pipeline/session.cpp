#include "pipeline/session.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "kernels/attention.h"
#include "mask/chunk_mask.h"
#include "model/reference_forward.h"
#include "pipeline/chunker.h"

namespace splitdec {

// The plan's attention for one chunk: stores the chunk's new K/V where the
// path keeps them, then runs the path's kernel. The chunk's mask depends on
// the layer's rule only, so it is built once per distinct rule (a model has
// at most two: sliding and full), not once per layer.
class SessionAttention : public AttentionStage {
 public:
  SessionAttention(Session& s, AttentionPath path, int64_t first, int rows, const std::vector<std::vector<int>>& blocks)
      : s_(s), path_(path), first_(first), rows_(rows), blocks_(blocks) {}

  void attend(int layer, const float* q, const float* k, const float* v, float* out) override {
    const ModelConfig& c = s_.model_.config();
    const LayerSpec& spec = c.layers[size_t(layer)];
    const bool concat_store = path_ == AttentionPath::DenseBias || (s_.options_.plan == Plan::SplitCopy && path_ == AttentionPath::Masked);
    if (k) {
      if (concat_store) allocated_ += int64_t(s_.concat_->append(layer, rows_, k, v));
      else s_.cache_->write(layer, first_, rows_, k, v);  // in place, at the current position
    }
    const KvView kv = concat_store ? s_.concat_->view(layer) : s_.cache_->view(layer);
    const QueryBlock qb{q, s_.batch_, rows_, c.num_heads, spec.head_dim, first_, c.attn_scale};
    switch (path_) {
      case AttentionPath::Gqa:
        gqa_attention(qb, kv, spec.window, s_.seq_start_.data(), out);
        break;
      case AttentionPath::Masked:
      case AttentionPath::Unified:
        masked_prefill_attention(qb, kv, mask_for(spec, intervals_, chunk_row_intervals).data(), out);
        break;
      case AttentionPath::DenseBias:
        dense_bias_attention(qb, kv, mask_for(spec, biases_, chunk_dense_bias).data(), out);
        break;
    }
  }
  int64_t allocated() const { return allocated_; }

 private:
  template <class T, class Build>
  const std::vector<T>& mask_for(const LayerSpec& spec, std::map<LayerMaskRule, std::vector<T>>& built, Build build) {
    const LayerMaskRule rule = layer_mask_rule(s_.policy_, spec.type, spec.window);
    auto it = built.find(rule);
    if (it == built.end())
      it = built.emplace(rule, build(rule, ChunkMaskInput{first_, rows_, s_.batch_, &blocks_, s_.seq_start_.data()})).first;
    return it->second;
  }

  Session& s_;
  AttentionPath path_;
  int64_t first_;
  int rows_;
  const std::vector<std::vector<int>>& blocks_;
  int64_t allocated_ = 0;
  std::map<LayerMaskRule, std::vector<KeyInterval>> intervals_;
  std::map<LayerMaskRule, std::vector<float>> biases_;
};

namespace {
bool uses_cache(Plan p) { return p != Plan::Single; }
bool uses_concat(Plan p) { return p == Plan::Single || p == Plan::SplitCopy; }
}  // namespace

Session::Session(const Model& model, int batch, SessionOptions options)
    : model_(model), batch_(batch), options_(options) {
  const ModelConfig& c = model.config();
  if (batch < 1) throw InputError("batch must hold at least one sequence");
  if (options_.chunk < 1) throw InputError("chunk size must be at least 1, got " + std::to_string(options_.chunk));
  if (options_.capacity < 1) throw InputError("KV capacity must be at least 1, got " + std::to_string(options_.capacity));
  // Room for a chunk plus two images: staggered images in a batch can join chunks.
  if (options_.max_chunk == 0) options_.max_chunk = options_.chunk + 2 * c.mm_tokens_per_image;
  if (options_.max_chunk < options_.chunk)
    throw InputError("max chunk " + std::to_string(options_.max_chunk) + " is smaller than the chunk size " + std::to_string(options_.chunk));
  for (const LayerSpec& l : c.layers)
    if (c.num_heads / l.num_kv_heads > 64) throw ConfigError("more than 64 query heads per KV head is not supported");
  policy_ = options_.policy.value_or(c.default_policy);
  if (uses_cache(options_.plan)) cache_.emplace(c, batch, options_.capacity, options_.max_chunk, options_.kv_dtype);
  if (uses_concat(options_.plan)) concat_.emplace(c, batch);
  seq_start_.assign(size_t(batch), 0);
  rope_next_.assign(size_t(batch), 0);
}

KvMemory Session::memory() const { return cache_ ? cache_->memory() : KvMemory{}; }

void Session::validate_segment(const PromptBatch& seg) const {
  if (seg.batch != batch_)
    throw InputError("segment has " + std::to_string(seg.batch) + " sequences, the session " + std::to_string(batch_));
  validate_prompt_batch(seg, model_.config());
  for (int b = 0; b < seg.batch; ++b) {
    bool real_seen = false;
    for (int s = 0; s < seg.seq; ++s) {
      const bool pad = seg.attention_mask[size_t(b) * size_t(seg.seq) + size_t(s)] == 0;
      if (pad && (real_seen || length_ > 0))
        throw InputError("sequence " + std::to_string(b) + " position " + std::to_string(length_ + s) +
                         ": padding is only supported at the left of the first prompt");
      real_seen = real_seen || !pad;
    }
    if (!real_seen) throw InputError("sequence " + std::to_string(b) + " of the segment is all padding");
  }
  if (length_ + seg.seq > options_.capacity)
    throw CapacityError("a segment of " + std::to_string(seg.seq) + " tokens at position " + std::to_string(length_) +
                        " does not fit the KV capacity of " + std::to_string(options_.capacity) + " positions (" +
                        std::to_string(options_.capacity - length_) + " remain)");
}

std::vector<float> Session::append(const PromptBatch& seg, bool all_positions) {
  validate_segment(seg);
  SegmentState state(seg);
  const std::vector<ChunkSpan> chunks = split_into_chunks(state.blocks, options_.chunk);
  const bool rings = cache_.has_value();
  for (const ChunkSpan& ch : chunks) {
    const int n = ch.end - ch.begin;
    if (rings && n > options_.max_chunk)
      throw CapacityError("a media block makes a chunk of " + std::to_string(n) + " positions at position " +
                          std::to_string(length_ + ch.begin) + ", more than the session's max chunk of " +
                          std::to_string(options_.max_chunk) +
                          " (sliding-layer rings hold window + max chunk positions); open the session with a larger max chunk");
  }
  if (length_ == 0)
    for (int b = 0; b < batch_; ++b) {
      int64_t pads = 0;
      while (seg.attention_mask[size_t(b) * size_t(seg.seq) + size_t(pads)] == 0) ++pads;
      seq_start_[size_t(b)] = pads;
    }
  const bool bidirectional = policy_has_bidirectional_layer(policy_);
  const int V = model_.config().vocab_size;
  std::vector<float> logits(size_t(batch_) * size_t(all_positions ? seg.seq : 1) * size_t(V));
  for (const ChunkSpan& ch : chunks) {
    run_chunk(seg, state, ch.begin, ch.end, route_chunk(options_.plan, ch.media && bidirectional, false),
              TraceEntry::Prefill, all_positions, logits);
    if (options_.progress) options_.progress(ch.end, seg.seq);
  }
  return logits;
}

std::vector<float> Session::decode(const std::vector<int>& tokens) {
  if (int(tokens.size()) != batch_)
    throw InputError("decode needs one token per sequence (" + std::to_string(batch_) + "), got " + std::to_string(tokens.size()));
  if (length_ == 0) throw InputError("decode before any prompt: append a prompt first");
  if (length_ >= options_.capacity)
    throw CapacityError("KV capacity of " + std::to_string(options_.capacity) + " positions is exhausted");
  const PromptBatch step = PromptBatch::text_column(tokens);
  validate_prompt_batch(step, model_.config());
  std::vector<float> logits(size_t(batch_) * size_t(model_.config().vocab_size));
  // A decode step's query is text: plain causal under every policy.
  SegmentState state(step);
  run_chunk(step, state, 0, 1, route_chunk(options_.plan, false, true), TraceEntry::Decode, false, logits);
  return logits;
}

// split-copy keeps two KV layouts; bring the one `path` reads up to date.
size_t Session::sync_for(AttentionPath path) {
  if (options_.plan != Plan::SplitCopy) return 0;
  const ModelConfig& c = model_.config();
  size_t copied = 0;
  if (path == AttentionPath::Masked && concat_valid_ < length_) {
    // Decoded positions live only in the shared buffer: the prefill stage's past needs them.
    for (int l = 0; l < c.num_layers; ++l)
      if (cache_->owns(l)) copied += concat_->append_from(l, cache_->view(l), concat_valid_, length_);
    concat_valid_ = length_;
  } else if (path == AttentionPath::Gqa && cache_valid_ < length_) {
    // The handoff: the prefill present is copied into the decode buffer.
    for (int l = 0; l < c.num_layers; ++l)
      if (cache_->owns(l)) copied += cache_->copy_from(l, concat_->view(l), cache_valid_, length_);
    cache_valid_ = length_;
  }
  return copied;
}

Session::SegmentState::SegmentState(const PromptBatch& seg) {
  for (int b = 0; b < seg.batch; ++b) {
    blocks.push_back(seg.sequence_block_ids(b));
    next_media_row.push_back(seg.sequence_media_rows(b).first);
  }
}

void Session::run_chunk(const PromptBatch& seg, SegmentState& state, int begin, int end, AttentionPath path,
                        TraceEntry::Kind kind, bool all_positions, std::vector<float>& logits) {
  const ModelConfig& c = model_.config();
  const int rows = end - begin, H = c.hidden_size, V = c.vocab_size;
  TraceEntry entry{kind, length_, length_ + rows, path, 0, 0};
  entry.kv_bytes_copied += int64_t(sync_for(path));

  // Gather the chunk's rows: tokens, embeddings (media spliced), positions, block ids.
  PromptBatch chunk;
  chunk.batch = batch_;
  chunk.seq = rows;
  std::vector<std::vector<int>> blocks(static_cast<size_t>(batch_));
  std::vector<int64_t> positions;
  for (int b = 0; b < batch_; ++b) {
    const std::vector<int>& seg_blocks = state.blocks[size_t(b)];
    int64_t& media_row = state.next_media_row[size_t(b)];
    for (int s = begin; s < end; ++s) {
      const size_t r = size_t(b) * size_t(seg.seq) + size_t(s);
      chunk.tokens.push_back(seg.tokens[r]);
      chunk.modality.push_back(seg.modality[r]);
      chunk.attention_mask.push_back(seg.attention_mask[r]);
      blocks[size_t(b)].push_back(seg_blocks[size_t(s)]);
      positions.push_back(seg.attention_mask[r] ? rope_next_[size_t(b)]++ : 0);
      if (!seg.media.empty() && seg.modality[r] != Modality::Text) {
        chunk.media.insert(chunk.media.end(), seg.media.begin() + long(media_row * H), seg.media.begin() + long((media_row + 1) * H));
        ++media_row;
      }
    }
  }
  // Chunk-local block ids, renumbered from 0 (a chunk holds whole blocks).
  for (auto& ids : blocks) {
    int base = -1;
    for (int id : ids)
      if (id >= 0 && (base < 0 || id < base)) base = id;
    for (int& id : ids) id = id < 0 ? -1 : id - base;
  }
  std::vector<float> hidden = embed_prompt(model_, chunk);
  SessionAttention attention(*this, path, length_, rows, blocks);
  model_.run_layers(hidden.data(), batch_ * rows, positions.data(), attention);
  entry.kv_bytes_allocated = attention.allocated();
  if (path == AttentionPath::DenseBias) entry.kv_bytes_copied += attention.allocated();  // concat copies the past
  if (options_.plan == Plan::SplitCopy) {
    if (path == AttentionPath::Masked) concat_valid_ = length_ + rows, entry.kv_bytes_copied += attention.allocated();
    else cache_valid_ = length_ + rows;
  }
  length_ += rows;

  // Logits: every row of the chunk, or only each sequence's last row.
  if (all_positions) {
    std::vector<float> out(size_t(batch_) * size_t(rows) * size_t(V));
    model_.logits(hidden.data(), batch_ * rows, out.data());
    for (int b = 0; b < batch_; ++b)
      std::copy_n(out.data() + size_t(b) * size_t(rows) * size_t(V), size_t(rows) * size_t(V),
                  logits.data() + (size_t(b) * size_t(seg.seq) + size_t(begin)) * size_t(V));
  } else if (end == seg.seq) {
    std::vector<float> last(size_t(batch_) * size_t(H));
    for (int b = 0; b < batch_; ++b)
      std::copy_n(hidden.data() + (size_t(b) * size_t(rows) + size_t(rows - 1)) * size_t(H), H, last.data() + size_t(b) * size_t(H));
    model_.logits(last.data(), batch_, logits.data());
  }
  trace_.push_back(entry);
}

void Session::fill_synthetic(int64_t length) {
  if (length_ != 0) throw InputError("fill_synthetic needs an empty session");
  if (length < 1 || length > options_.capacity)
    throw CapacityError("fill_synthetic: " + std::to_string(length) + " positions do not fit the capacity of " +
                        std::to_string(options_.capacity));
  const ModelConfig& c = model_.config();
  if (concat_) {
    for (int l = 0; l < c.num_layers; ++l) {
      if (c.layers[size_t(l)].kv_source != l) continue;
      const LayerSpec& s = c.layers[size_t(l)];
      const std::vector<float> zeros(size_t(batch_) * size_t(length) * size_t(s.num_kv_heads) * size_t(s.head_dim), 0.f);
      concat_->append(l, int(length), zeros.data(), zeros.data());
    }
  }
  length_ = length;
  cache_valid_ = concat_valid_ = length;
  for (int b = 0; b < batch_; ++b) seq_start_[size_t(b)] = 0, rope_next_[size_t(b)] = length;
}

void Session::rewind(int64_t length) {
  if (length < 0) throw InputError("cannot rewind to position " + std::to_string(length) + ": before the start");
  if (length > length_)
    throw InputError("cannot rewind to position " + std::to_string(length) + ": the session holds only " + std::to_string(length_));
  if (length > 0) {
    for (int b = 0; b < batch_; ++b)
      if (length < seq_start_[size_t(b)])
        throw InputError("cannot rewind to position " + std::to_string(length) + ": it cuts into the left padding of sequence " +
                         std::to_string(b) + " (first token at " + std::to_string(seq_start_[size_t(b)]) + "); rewind to 0 to start over");
    if (cache_) {
      const ModelConfig& c = model_.config();
      const int64_t first_real = *std::min_element(seq_start_.begin(), seq_start_.end());
      for (int l = 0; l < c.num_layers; ++l) {
        const LayerSpec& s = c.layers[size_t(l)];
        if (s.window == 0 || !cache_->owns(l)) continue;
        const int64_t needed = std::max(first_real, length - s.window + 1);
        const int64_t held = cache_->oldest_held(l, options_.plan == Plan::SplitCopy ? cache_valid_ : length_);
        if (needed < held && !(options_.plan == Plan::SplitCopy && concat_valid_ >= length))
          throw CapacityError("cannot rewind to position " + std::to_string(length) + ": sliding layer " + std::to_string(l) +
                              " keeps a ring of its last positions and has dropped position " + std::to_string(needed) +
                              " (oldest held: " + std::to_string(held) + ")");
      }
    }
  }
  length_ = length;
  for (int b = 0; b < batch_; ++b) {
    if (length == 0) seq_start_[size_t(b)] = 0;
    rope_next_[size_t(b)] = std::max<int64_t>(0, length - seq_start_[size_t(b)]);
  }
  if (concat_) concat_->truncate(length);
  cache_valid_ = std::min(cache_valid_, length);
  concat_valid_ = std::min(concat_valid_, length);
}

}  // namespace splitdec
