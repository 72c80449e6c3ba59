#include "backend/cpu_backend.h"

#include <map>
#include <utility>

#include "core/error.h"
#include "mask/chunk_mask.h"
#include "model/embedding.h"

namespace splitdec {

namespace {

class CpuBackend;

// Attention for one call over all its sequences: each sequence's new K/V go
// into its slot of the store, then the path's kernel runs over that slot. A
// sequence's mask depends on the layer's rule only, so it is built once per
// (rule, sequence) (a model has at most two rules: sliding and full), not
// once per layer.
class CallAttention : public AttentionStage {
 public:
  CallAttention(const Model& model, MaskPolicy policy, KvStore& kv, KvLayout layout, const BackendCall& call, const CpuContext& cpu)
      : model_(model), policy_(policy), kv_(kv), layout_(layout), call_(call), cpu_(cpu) {}

  void attend(int layer, const float* q, const float* k, const float* v, float* out) override {
    const ModelConfig& c = model_.config();
    const LayerSpec& spec = c.layers[size_t(layer)];
    const int rows = call_.rows;
    const size_t q_rows = size_t(rows) * size_t(c.num_heads) * size_t(spec.head_dim);
    const size_t kv_rows = size_t(rows) * size_t(spec.num_kv_heads) * size_t(spec.head_dim);
    for (size_t i = 0; i < call_.sequences.size(); ++i) {
      const BackendSequence& sq = call_.sequences[i];
      if (k) kv_.write(layer, sq.slot, layout_, sq.first, rows, k + i * kv_rows, v + i * kv_rows);
      const KvView kv = kv_.view(layer, sq.slot, layout_);
      const QueryBlock qb{q + i * q_rows, 1, rows, c.num_heads, spec.head_dim, sq.first, c.attn_scale};
      float* o = out + i * q_rows;
      switch (call_.path) {
        case AttentionPath::Gqa:
          gqa_attention(qb, kv, spec.window, &sq.start, o, cpu_);
          break;
        case AttentionPath::Masked:
        case AttentionPath::Unified:
          masked_prefill_attention(qb, kv, mask_for(spec, i, intervals_, chunk_row_intervals).data(), o, cpu_);
          break;
        case AttentionPath::DenseBias:
          dense_bias_attention(qb, kv, mask_for(spec, i, biases_, chunk_dense_bias).data(), o, cpu_);
          break;
      }
    }
  }

 private:
  using Key = std::pair<LayerMaskRule, size_t>;
  template <class T, class Build>
  const std::vector<T>& mask_for(const LayerSpec& spec, size_t i, std::map<Key, std::vector<T>>& built, Build build) {
    const Key key{layer_mask_rule(policy_, spec.type, spec.window), i};
    auto it = built.find(key);
    if (it == built.end()) {
      const BackendSequence& sq = call_.sequences[i];
      const std::vector<std::vector<int>> blocks{sq.blocks};
      it = built.emplace(key, build(key.first, ChunkMaskInput{sq.first, call_.rows, 1, &blocks, &sq.start})).first;
    }
    return it->second;
  }

  const Model& model_;
  MaskPolicy policy_;
  KvStore& kv_;
  KvLayout layout_;
  const BackendCall& call_;
  const CpuContext& cpu_;
  std::map<Key, std::vector<KeyInterval>> intervals_;
  std::map<Key, std::vector<float>> biases_;
};

class CpuBackend final : public DecoderBackend {
 public:
  CpuBackend(const Model& model, MaskPolicy policy, KvLayout (*layout)(AttentionPath), std::unique_ptr<KvStore> store)
      : model_(model), policy_(policy), layout_(layout), kv_(std::move(store)) {}

  const char* name() const override { return "cpu"; }
  const Model& model() const override { return model_; }

  std::vector<float> forward(const BackendCall& call) override {
    const ModelConfig& c = model_.config();
    const int n = int(call.sequences.size()), rows = call.rows, H = c.hidden_size, V = c.vocab_size;
    const KvLayout layout = layout_(call.path);
    // The threads and SIMD table every kernel of this call runs on: chosen
    // here, once, not by each kernel (the pool is the process's as the
    // call starts; a set_threads meanwhile leaves this call on it).
    const CpuContext cpu = CpuContext::process_default();
    // The embeddings first: they read the checkpoint file (the per-layer
    // table), which can fail, and nothing is stored before they are made.
    std::vector<const float*> sequence_media;
    for (const BackendSequence& sq : call.sequences)
      if (sq.media) sequence_media.push_back(sq.media);
    if (!sequence_media.empty() && sequence_media.size() != call.sequences.size())
      throw InputError("a backend call gives media rows in place for some of its sequences only");
    std::vector<float> hidden = embed_prompt(model_, *call.input, sequence_media.empty() ? nullptr : sequence_media.data());
    const std::vector<float> per_layer = embed_per_layer(model_, *call.input, hidden, call.decode, cpu);
    kv_->fit_chunk(layout, rows);  // a long media block grows the rings (the session checked memory_for_call)
    for (const BackendSequence& sq : call.sequences) kv_->prepare(sq.slot, layout, sq.first);
    CallAttention attention(model_, policy_, *kv_, layout, call, cpu);
    model_.run_layers(hidden.data(), n * rows, call.positions, attention, call.decode,
                      per_layer.empty() ? nullptr : per_layer.data(), cpu);
    switch (call.logits) {
      case BackendCall::Logits::None:
        return {};
      case BackendCall::Logits::AllRows: {
        std::vector<float> out(size_t(n) * size_t(rows) * size_t(V));
        model_.logits(hidden.data(), n * rows, out.data(), false, cpu);
        return out;
      }
      case BackendCall::Logits::LastRow:
        break;
    }
    std::vector<float> last(size_t(n) * size_t(H));
    for (int b = 0; b < n; ++b)
      std::copy_n(hidden.data() + (size_t(b) * size_t(rows) + size_t(rows - 1)) * size_t(H), H, last.data() + size_t(b) * size_t(H));
    std::vector<float> out(size_t(n) * size_t(V));
    model_.logits(last.data(), n, out.data(), call.decode, cpu);
    return out;
  }

  void clear_slot(int slot) override { kv_->clear(slot); }
  void copy_slot(int from, int to) override { kv_->copy_sequence(from, to); }
  void check_rewind(int slot, int64_t length, int64_t first_real) const override { kv_->check_rewind(slot, length, first_real); }
  void rewind(int slot, int64_t length) override { kv_->rewind(slot, length); }
  KvMemory memory() const override { return kv_->memory(); }
  KvMemory memory_for_call(AttentionPath path, int rows) const override { return kv_->memory_for_chunk(layout_(path), rows); }
  KvTraffic take_traffic() override { return kv_->take_traffic(); }

  void fill_zero_past(int slot, int64_t length, AttentionPath path) override {
    const ModelConfig& c = model_.config();
    std::vector<float> zeros;
    for (int l = 0; l < c.num_layers; ++l) {
      if (c.is_kv_shared(l)) continue;
      const LayerSpec& s = c.layers[size_t(l)];
      zeros.assign(size_t(length) * size_t(s.num_kv_heads) * size_t(s.head_dim), 0.f);
      kv_->write(l, slot, layout_(path), 0, int(length), zeros.data(), zeros.data());
    }
    kv_->take_traffic();
  }

 private:
  const Model& model_;
  MaskPolicy policy_;
  KvLayout (*layout_)(AttentionPath);
  std::unique_ptr<KvStore> kv_;
};

}  // namespace

std::unique_ptr<DecoderBackend> make_cpu_backend(const Model& model, MaskPolicy policy, KvLayout (*layout)(AttentionPath),
                                                 std::unique_ptr<KvStore> store) {
  return std::make_unique<CpuBackend>(model, policy, layout, std::move(store));
}

}  // namespace splitdec
