// `splitdec quantize --out-mmproj FILE.gguf`: a folder's media towers
// written as the mmproj GGUF that llama.cpp's converter writes for it:
// `general.architecture` clip, the clip.* keys, llama.cpp's tensor names.
//  - Gemma-3 (Gemma3VisionModel): the SigLIP tower (io/families/gemma3_mmproj.h),
//    mm.soft_emb_norm stored as 1 + w; the patch and position embeddings
//    and every 1-D tensor in F32, mm.input_projection in F16 (F32 when the
//    matrices are), the layers' matrices in the type asked.
//  - Gemma-4 (Gemma4VisionAudioModel): the vision encoder (gemma4v) and the
//    conformer audio encoder (gemma4a) where the folder has them
//    (io/families/gemma4_mmproj.h): the patch embedding as a conv kernel
//    (F16 when asked for f16, else F32), per_dim_scale after its softplus,
//    the audio convs, norms, tables and bounds in F32, the rest in the type asked.
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
