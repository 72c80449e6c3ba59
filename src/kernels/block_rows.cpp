#include "kernels/block_rows.h"

#include "kernels/row_kernels.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

std::optional<WeightFormat> weight_format_of_blocks(BlockType b) {
  switch (b) {
    case BlockType::Q8_0: return WeightFormat::Q8_0;
    case BlockType::Q4_0: return WeightFormat::Q4_0;
    case BlockType::Q4_K: return WeightFormat::Q4_K;
    case BlockType::Q5_K: return WeightFormat::Q5_K;
    case BlockType::Q6_K: return WeightFormat::Q6_K;
    default: return std::nullopt;
  }
}

bool ggml_blocks_of(BlockType b, GgmlBlocks* f) {
  switch (b) {
    case BlockType::Q4_1: return *f = GgmlBlocks::Q4_1, true;
    case BlockType::Q5_0: return *f = GgmlBlocks::Q5_0, true;
    case BlockType::Q5_1: return *f = GgmlBlocks::Q5_1, true;
    case BlockType::Q4_K: return *f = GgmlBlocks::Q4_K, true;
    case BlockType::Q5_K: return *f = GgmlBlocks::Q5_K, true;
    case BlockType::Q6_K: return *f = GgmlBlocks::Q6_K, true;
    default: return false;
  }
}

size_t block_row_bytes(BlockType b, int64_t n) {
  if (const std::optional<WeightFormat> f = weight_format_of_blocks(b)) return weight_row_bytes(*f, int(n));
  GgmlBlocks g;
  if (!ggml_blocks_of(b, &g)) return 0;
  return size_t(n / ggml_block_layout(g).values) * ggml_block_layout(g).bytes;
}

void expand_block_rows(BlockType b, const uint8_t* src, int64_t rows, int64_t n, float* dst) {
  if (const std::optional<WeightFormat> f = weight_format_of_blocks(b)) {
    const RowKernels& k = row_kernels(*f);
    const size_t row_bytes = weight_row_bytes(*f, int(n));
    for (int64_t r = 0; r < rows; ++r) k.to_f32(simd::best(), src + size_t(r) * row_bytes, int(n), dst + r * n);
    return;
  }
  if (GgmlBlocks g; ggml_blocks_of(b, &g)) dequantize_ggml_blocks(g, src, dst, rows * n);
}

}  // namespace splitdec
