// The Q4_0 row-group kernel for avx2 (q4_row_groups_x86.inc).
#define Q4G_LANES 8
#define Q4G_VNNI 0
#define Q4G_FUNCTION q4_group_dot_avx2
#include "kernels/simd/q4_row_groups_x86.inc"
