// The Q4_0 row-group kernel for avx_vnni (q4_row_groups_x86.inc).
#define Q4G_LANES 8
#define Q4G_VNNI 1
#define Q4G_FUNCTION q4_group_dot_avx_vnni
#include "kernels/simd/q4_row_groups_x86.inc"
