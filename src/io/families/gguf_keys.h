// Reading a GGUF text model's metadata into the Hugging Face config it
// stands for: each value range-checked under its own key, and the special
// token ids every Gemma family stores the same way. Shared by the family
// readers (gemma3_gguf.cpp, gemma4_gguf.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace splitdec {

class GgufFile;

class GgufKeys {
 public:
  explicit GgufKeys(const GgufFile& file) : f_(file) {}

  // ConfigError "FILE: metadata 'KEY' WHAT".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // An integer in [1, limit]; `fallback` when absent, else required.
  int64_t count(const std::string& key, std::optional<int64_t> fallback, int64_t limit) const;
  // The same, stored once for every layer or as one entry per layer
  // (llama.cpp's get_key_or_arr): `layers` values.
  std::vector<int64_t> per_layer(const std::string& key, std::optional<int64_t> fallback, int64_t limit, int64_t layers) const;
  // A positive finite number, `fallback` when absent.
  double positive(const std::string& key, double fallback) const;
  // The layer types: one bool per layer (true: sliding) or a period (every
  // period-th layer full), `default_period` when absent.
  std::vector<bool> sliding_layers(const std::string& key, int64_t layers, int64_t default_period) const;
  // The row count of a 2-D tensor (a vocabulary's table), in [1, 2^24];
  // FormatError naming the tensor when it is missing or another shape.
  int64_t table_rows(const std::string& tensor) const;
  // bos/pad/eos token ids from tokenizer.ggml.*, checked against the
  // vocabulary. Generation also ends at the end-of-turn token when the file
  // names one, and at each of the pieces `end_of_generation` (llama.cpp
  // stops on them by their text: llama-vocab.cpp).
  void special_tokens(nlohmann::json& config, int64_t vocab, const std::vector<std::string>& end_of_generation) const;
  // A positive finite softcap under `key`, absent or 0 meaning none (as llama.cpp).
  void softcap(nlohmann::json& config, const std::string& key) const;

 private:
  const GgufFile& f_;
};

}  // namespace splitdec
