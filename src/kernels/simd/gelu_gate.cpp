#include "kernels/simd/gelu_gate.h"

namespace splitdec::simd {

GeluGate gelu_gate_kernel(const KernelTable& table) {
  if (&table == &avx512_table()) return gelu_gate_avx512;
  if (&table == &avx2_table()) return gelu_gate_avx2;
  return gelu_gate_generic;
}

}  // namespace splitdec::simd
