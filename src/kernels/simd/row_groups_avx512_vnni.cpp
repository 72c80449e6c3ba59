// The row-group kernels for avx512_vnni (row_groups_x86.inc).
#define RG_LANES 16
#define RG_VNNI 1
#define RG_SUFFIX avx512_vnni
#include "kernels/simd/row_groups_x86.inc"
