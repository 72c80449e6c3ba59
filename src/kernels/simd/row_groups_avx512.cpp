// The row-group kernels for avx512 (row_groups_x86.inc).
#define RG_LANES 16
#define RG_VNNI 0
#define RG_SUFFIX avx512
#include "kernels/simd/row_groups_x86.inc"
