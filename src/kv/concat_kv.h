// Separate past and present, as a static exported graph without a shared
// buffer has them: every call produces present = concat(past, new) in a new
// buffer and copies the whole past into it. The `single` plan runs on this
// on purpose, to measure that cost; `split-copy` uses it for its prefill
// stage. Buffers are recycled the way a runtime's arena allocator would
// (the previous present becomes the spare), so what is measured is the
// copy, not page faults.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/model_config.h"
#include "kernels/attention.h"

namespace splitdec {

class ConcatKv {
 public:
  ConcatKv(const ModelConfig& config, int batch);

  // present = concat(past, new rows [batch, n, kv_heads, head_dim]).
  // Returns the bytes of the new present (all of it is written by copies).
  size_t append(int layer, int n, const float* k, const float* v);
  // Same, with the new positions taken from another view (a handoff copy).
  size_t append_from(int layer, const KvView& src, int64_t from, int64_t to);
  KvView view(int layer) const;
  void truncate(int64_t length);

 private:
  // An uninitialised float buffer that remembers its capacity.
  struct Block {
    std::unique_ptr<float[]> data;
    size_t capacity = 0;
    void reserve(size_t n);
  };
  struct Layer {
    int64_t length = 0;
    Block k, v, spare_k, spare_v;
  };
  size_t grow(int layer, int n);
  const ModelConfig* config_;
  int batch_;
  std::vector<Layer> layers_;
};

}  // namespace splitdec
