// The row-group kernels for avx_vnni (row_groups_x86.inc).
#define RG_LANES 8
#define RG_VNNI 1
#define RG_SUFFIX avx_vnni
#include "kernels/simd/row_groups_x86.inc"
