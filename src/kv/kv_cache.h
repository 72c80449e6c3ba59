// The shared KV cache: one buffer per layer that owns K/V, allocated once
// when a session starts, laid out [batch, kv_heads, slots, head_dim]. Both
// the masked prefill path and the GQA path read and write it in place, so
// handing a prompt over to decoding copies nothing.
//
// Full layers hold `capacity` positions. Sliding layers hold a ring of
// window + max_chunk positions: a chunk of up to max_chunk queries writes its
// K/V first and then needs the window - 1 positions before it, so nothing it
// reads is overwritten. KV-shared layers (Gemma-4) own no buffer. Storage
// is f32 or bf16; the kernels read either.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"
#include "kernels/attention.h"

namespace splitdec {

struct KvMemory {
  int sliding_layers = 0, full_layers = 0, shared_layers = 0;
  int64_t sliding_slots = 0, full_slots = 0;
  size_t sliding_bytes = 0, full_bytes = 0;
};

class KvCache {
 public:
  // dtype: F32, BF16 or F16 (16-bit: half the bytes; rounded to nearest even on write).
  KvCache(const ModelConfig& config, int batch, int64_t capacity, int max_chunk, DType dtype = DType::F32);
  // What a cache of these dimensions holds, without allocating it.
  static KvMemory plan(const ModelConfig& config, int batch, int64_t capacity, int max_chunk, DType dtype = DType::F32);

  // The buffer layer `layer` reads (its kv_source's).
  KvView view(int layer) const;
  // Writes rows [batch, n, kv_heads, head_dim] at positions [first, first + n).
  void write(int layer, int64_t first, int n, const float* k, const float* v);
  // Copies positions [from, to) out of `src` (any layout). Returns bytes copied.
  size_t copy_from(int layer, const KvView& src, int64_t from, int64_t to);
  // The oldest position a layer still holds once `length` positions were written.
  int64_t oldest_held(int layer, int64_t length) const;
  bool owns(int layer) const { return config_->layers[size_t(layer)].kv_source == layer; }
  KvMemory memory() const;

 private:
  struct Buffer {
    int64_t slots = 0;
    bool ring = false;
    std::vector<float> k, v;         // f32 storage
    std::vector<uint16_t> k16, v16;  // bf16 storage
  };
  void store_row(Buffer& buf, size_t dst, const float* k, const float* v, int hd);
  const ModelConfig* config_;
  int batch_;
  int64_t capacity_;
  int max_chunk_;
  DType dtype_;
  std::vector<Buffer> buffers_;  // indexed by layer; empty for KV-shared layers
};

// Slots of a sliding layer's ring (or capacity when the ring would not be smaller).
int64_t sliding_slots(int window, int64_t capacity, int max_chunk);

}  // namespace splitdec
