// `splitdec quantize --out-mmproj FILE.gguf`: a Gemma-3 folder's vision
// tower written as the mmproj GGUF that llama.cpp's converter
// (convert_hf_to_gguf.py --mmproj, class Gemma3VisionModel) writes for it:
// `general.architecture` clip, the clip.vision.* keys, llama.cpp's tensor
// names (io/families/gemma3_mmproj.h), mm.soft_emb_norm stored as 1 + w.
// Types as the converter chooses them: the patch and position embeddings
// and every 1-D tensor in F32, mm.input_projection in F16 (F32 when the
// matrices are), the layers' matrices in the type asked.
#pragma once

#include <functional>
#include <string>

namespace splitdec {

struct MmprojExportOptions {
  std::string model_dir, out_path;
  // f32 | f16 | bf16 | q8: the layers' matrices in that type (q8: Q8_0,
  // F16 for rows that are not whole 32-value blocks).
  std::string weights = "f16";
  std::function<void(size_t done, size_t total)> progress;  // per tensor
};

// InputError for a model without a Gemma-3 vision tower or a bad option;
// FormatError for a bad source tensor. Returns the number of tensors written.
int export_mmproj(const MmprojExportOptions& options);

}  // namespace splitdec
