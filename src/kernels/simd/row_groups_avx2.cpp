// The row-group kernels for avx2 (row_groups_x86.inc).
#define RG_LANES 8
#define RG_VNNI 0
#define RG_SUFFIX avx2
#include "kernels/simd/row_groups_x86.inc"
