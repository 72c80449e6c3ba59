// gate[i] = gelu_tanh(gate[i]) * up[i] (kernels/gelu.h) compiled once per
// instruction set, so the MLP's gate runs 8 or 16 lanes wide where the CPU
// has them (the baseline build vectorizes it 4 wide). Every version gives
// the same bits: each is gelu.h's code, element by element, built with
// floating-point contraction off (an fma would round once where the
// baseline rounds twice).
#pragma once

#include <cstdint>

#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

using GeluGate = void (*)(float* gate, const float* up, int64_t n);

// The version that goes with a SIMD table.
GeluGate gelu_gate_kernel(const KernelTable& table);

// Per instruction set (gelu_gate_*.cpp); call only where the CPU has it.
void gelu_gate_generic(float* gate, const float* up, int64_t n);
void gelu_gate_avx2(float* gate, const float* up, int64_t n);
void gelu_gate_avx512(float* gate, const float* up, int64_t n);

}  // namespace splitdec::simd
