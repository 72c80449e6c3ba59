// AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c; only called when the CPU has them).
#define SIMD_WIDTH 8
#define SIMD_NS avx2
#define SIMD_NAME "avx2"
#define SIMD_TABLE avx2_table
#include "kernels/simd/simd_vector.inc"
