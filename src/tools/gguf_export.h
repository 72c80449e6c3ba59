// `splitdec quantize --out FILE.gguf`: a Gemma-3 or Gemma-4 model folder
// written as the GGUF that llama.cpp's converter (convert_hf_to_gguf.py,
// Gemma3Model / Gemma4Model) writes for it: the same metadata keys,
// llama.cpp's tensor names, Gemma-3's norms stored as 1 + w in f32, Gemma-4's
// rope_freqs, the vocabulary as SentencePiece pieces and scores (Gemma-3
// with tokenizer.model) or pieces and merges, with token types. Streamed from the source's mapped files a few thousand rows
// at a time, so peak memory stays small whatever the model's size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace splitdec {

struct GgufExportOptions {
  std::string model_dir, out_path;
  // f32 | f16 | bf16: every matrix in that type (the converter's --outtype);
  // q8: Q8_0 (its --outtype q8_0); q4: Q4_0 linear layers and a Q8_0
  // embedding, as splitdec's --weights q4 keeps them. Rows that are not
  // whole 32-blocks fall back to F16, as the converter does.
  std::string weights;
  // tokenizer.chat_template (the folder's template; the caller reads it).
  std::optional<std::string> chat_template;
  std::function<void(size_t done, size_t total)> progress;  // per tensor
};

struct GgufExportSummary {
  int tensors = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor bytes read and written
};

// InputError naming the --weights value when it is not one a GGUF is written in.
void check_gguf_weights(const std::string& weights);

// InputError for a bad option or a model GGUF cannot express (a query scale
// or a KV-sharing layout llama.cpp would read otherwise); FormatError for a
// bad source tensor.
GgufExportSummary export_gguf(const GgufExportOptions& options);

}  // namespace splitdec
