// `splitdec quantize`: a model folder whose decoder matrices are stored as
// Q8_0 or Q4_0 blocks (model/quantized_tensors.h), written from the source's
// mapped files a few thousand rows at a time, so peak memory is a few
// hundred MiB whatever the model's size. Everything else (norms, media
// towers, tokenizer, templates) is copied as it is; config.json gains a
// "splitdec_quantization" note. The loader reads the result as it is stored.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace splitdec {

struct QuantizeOptions {
  std::string model_dir, out_dir;  // out_dir: new or empty
  std::string weights;             // "q8" or "q4" (what --weights takes at load, without -f32act)
  // Glob patterns (fnmatch) of tensor names written as stored, e.g.
  // "*embed_tokens*" or "*.layers.0.*".
  std::vector<std::string> keep;
  std::function<void(size_t done, size_t total)> progress;  // per tensor
};

struct QuantizeSummary {
  int quantized = 0, kept = 0;  // decoder matrices quantized / kept as stored by --keep
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor bytes read and written
};

// InputError for a bad option; FormatError for a bad source tensor (named).
QuantizeSummary quantize_model(const QuantizeOptions& options);

// config.json's "splitdec_quantization" note for `weights` ("q8" / "q4")
// with the --keep patterns `kept` (make-model --weights writes it too).
nlohmann::ordered_json quantization_note(const std::string& weights, const std::vector<std::string>& kept);

}  // namespace splitdec
