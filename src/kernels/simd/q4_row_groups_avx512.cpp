// The Q4_0 row-group kernel for avx512 (q4_row_groups_x86.inc).
#define Q4G_LANES 16
#define Q4G_VNNI 0
#define Q4G_FUNCTION q4_group_dot_avx512
#include "kernels/simd/q4_row_groups_x86.inc"
