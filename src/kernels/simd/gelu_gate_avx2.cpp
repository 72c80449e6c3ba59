#define GELU_GATE_NAME gelu_gate_avx2
#include "kernels/simd/gelu_gate.inc"
