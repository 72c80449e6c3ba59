// The AVX512_BF16 pieces of gemm_bf16 (kernels/gemm_bf16.h), compiled in
// their own translation unit with -mavx512bf16; call them only when the CPU
// has it. Activations and weights travel as bf16 pairs in uint32 words
// (low half: even k, high half: odd k; an odd `in` pads its last pair with
// a zero), the operand vdpbf16ps takes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitdec::simd {

// Outputs per strip of a packed panel: two zmm of 16 f32 sums.
constexpr int kBf16StripOutputs = 32;

// One row of `in` f32 values to (in + 1) / 2 bf16 pairs, round to nearest even.
void bf16_pairs_from_f32(const float* x, int in, uint32_t* dst);

// Words of scratch gemm_bf16_panel needs for a panel of n outputs (one
// k block of it packed: at most 256 KiB).
size_t bf16_panel_scratch_words(int n);

// How the weight rows a panel reads are stored (kernels/weight_matrix.h's
// formats, minus f32). All but BF16 are rounded to bf16 while packed: F16
// widened, Q8_0 / Q4_0 blocks expanded to d * q (exact in f32), then each
// rounded to the nearest even bf16.
enum class PanelWeights { BF16, F16, Q8_0, Q4_0 };

// y[r][j] = sum over k of x[r][k] * w[o0 + j][k] for r < rows, j < n, each a
// single f32 sum taken k pair by k pair in order (vdpbf16ps). x: rows of
// (in + 1) / 2 pairs (bf16_pairs_from_f32); w: weight rows of `in` values
// from row 0, row_bytes apart, as `format` says (blocks: in % 32 == 0); y:
// row 0, column o0, rows ldy floats apart. The weight rows are packed one k
// block at a time into `scratch` (64-byte aligned), as strips of 32 outputs
// with each output's pairs side by side.
void gemm_bf16_panel(const uint32_t* x, int rows, const uint8_t* w, int64_t row_bytes, PanelWeights format, int in, int o0, int n,
                     float* y, int64_t ldy, uint32_t* scratch);
// Decode with bf16 products: y[r][o] = sum over k of x[r][k] * w[o][k] for
// r < rows and o in [o0, o1), x as bf16 pairs (bf16_pairs_from_f32), rows
// x_stride words apart; w rows of `in` 16-bit values, `format` BF16 or F16
// (f16 rounded to bf16 as loaded); y rows ldy floats apart. Every
// (row, output) is summed the same way whatever `rows` and the range are
// (two 16-lane accumulators over alternate 32-value steps, a short last
// step masked into the first, then both added and summed across lanes),
// so a sequence gets the same bits alone or in a batch. Outputs go two
// weight streams at a time (o and o + half of the range), up to four rows
// per weight load.
void matvec_bf16_products(const uint32_t* x, int rows, int64_t x_stride, const uint16_t* w, PanelWeights format, int in, int64_t o0,
                          int64_t o1, float* y, int64_t ldy);

}  // namespace splitdec::simd
