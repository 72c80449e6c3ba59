// A model folder's generation_config.json: the sampling its authors ship as
// the default (transformers' GenerationConfig; vLLM's server reads the same
// file). Gemma-3's says do_sample, top_k 64, top_p 0.95. Command-line flags
// and request fields override it field by field.
#pragma once

#include <optional>
#include <string>

namespace splitdec {

struct GenerationDefaults {
  std::string source;  // the file read; empty: none
  bool do_sample = false;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
};

// All unset when the folder has no generation_config.json (or `model` is a
// GGUF file). A file that is not JSON, or a field of the wrong type or out
// of its range, is a ConfigError naming the file and the field.
GenerationDefaults read_generation_config(const std::string& model);

}  // namespace splitdec
