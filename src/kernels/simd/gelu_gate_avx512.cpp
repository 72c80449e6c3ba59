#define GELU_GATE_NAME gelu_gate_avx512
#include "kernels/simd/gelu_gate.inc"
