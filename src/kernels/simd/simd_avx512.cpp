// AVX-512 F/BW/VL/DQ (compiled with those flags; only called when the CPU has them).
#define SIMD_WIDTH 16
#define SIMD_NS avx512
#define SIMD_NAME "avx512"
#define SIMD_TABLE avx512_table
#include "kernels/simd/simd_vector.inc"
