// `splitdec make-model`: random-weight model directories in the formats of a
// real checkpoint (config.json, model.safetensors, tokenizer.json, for
// Gemma-3 tokenizer.model too, tokenizer_config.json), for
// tests, demos and benchmarks. The same seed gives the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace splitdec {

struct MakeModelOptions {
  std::string preset;
  std::string out_dir;
  uint64_t seed = 0;
  std::optional<DType> dtype;  // default: f32 for tiny presets, bf16 for full-size ones
  std::optional<int> layers;   // keep only the first N layers
  // "q8" / "q4": the decoder's matrices written quantized, exactly as
  // `splitdec quantize` writes them from this dtype's values; empty: float.
  std::string weights{};
  // A chat template written beside the tokenizer, where the family's real
  // checkpoints keep it (Gemma-3: tokenizer_config.json, Gemma-4:
  // chat_template.jinja). Empty: none.
  std::string chat_template{};
  // progress(done, total) as weight tensors are written (a full-size preset
  // takes minutes).
  std::function<void(size_t, size_t)> progress{};
};

void make_model(const MakeModelOptions& options);

}  // namespace splitdec
