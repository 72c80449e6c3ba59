// llama.cpp's block formats that splitdec has no kernels for (Q4_1, Q5_0,
// Q5_1 and the K-quants Q4_K, Q5_K, Q6_K): what a GGUF downloaded as
// Q4_K_M, Q5_K_M or Q6_K holds. They are dequantized a row at a time while
// loading and stored in a format splitdec runs (Q8_0 unless --weights says
// otherwise). The layouts and the dequantization are llama.cpp's
// (ggml-common.h, ggml-quants.c); the quantizers write those layouts with
// plain min/max scales (not llama.cpp's error-minimizing search), for
// `quantize --out FILE.gguf` and the tests.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitdec {

enum class GgmlBlocks : uint8_t { Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };

struct GgmlBlockLayout {
  const char* name;     // llama.cpp's: "Q4_K"
  uint32_t ggml_type;   // the id a GGUF stores
  int values;           // per block: 32, or 256 for the K-quants
  size_t bytes;         // per block
};
const GgmlBlockLayout& ggml_block_layout(GgmlBlocks format);
// false when `ggml_type` is none of these.
bool ggml_blocks_of_type(uint32_t ggml_type, GgmlBlocks* format);

// Sub-block j's (0-7) 6-bit scale and min of a Q4_K / Q5_K block, from its
// 12 packed bytes (llama.cpp's get_scale_min_k4).
void k_quant_scale_min(int j, const uint8_t* packed, int* scale, int* min);

// `n` values (whole blocks) from their blocks.
void dequantize_ggml_blocks(GgmlBlocks format, const uint8_t* blocks, float* out, int64_t n);
// `n` values (whole blocks) into blocks.
void quantize_ggml_blocks(GgmlBlocks format, const float* values, uint8_t* blocks, int64_t n);

}  // namespace splitdec
