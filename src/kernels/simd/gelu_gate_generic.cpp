#define GELU_GATE_NAME gelu_gate_generic
#include "kernels/simd/gelu_gate.inc"
