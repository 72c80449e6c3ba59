// Separate past and present, as a static exported graph without a shared
// buffer has them: every call allocates present = concat(past, new) and
// copies the whole past into it. The `single` plan runs on this on purpose,
// to measure that cost; `split-copy` uses it for its prefill stage.
#pragma once

#include <cstdint>
#include <vector>

#include "io/model_config.h"
#include "kernels/attention.h"

namespace splitdec {

class ConcatKv {
 public:
  ConcatKv(const ModelConfig& config, int batch);

  // present = concat(past, new rows [batch, n, kv_heads, head_dim]).
  // Returns the bytes allocated (== bytes copied) for the new present.
  size_t append(int layer, int n, const float* k, const float* v);
  // Same, with the new positions taken from another view (a handoff copy).
  size_t append_from(int layer, const KvView& src, int64_t from, int64_t to);
  KvView view(int layer) const;
  int64_t length(int layer) const { return layers_[size_t(layer)].length; }
  void truncate(int64_t length);

 private:
  struct Layer {
    int64_t length = 0;
    std::vector<float> k, v;
  };
  size_t grow(int layer, int n);
  const ModelConfig* config_;
  int batch_;
  std::vector<Layer> layers_;
};

}  // namespace splitdec
