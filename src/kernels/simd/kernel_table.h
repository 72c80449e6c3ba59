// Vector primitives compiled once per instruction set, chosen at run time.
// Each table lives in its own translation unit built with that target's
// flags (simd_generic.cpp, simd_avx2.cpp, simd_avx512.cpp); the binary runs
// on any x86-64 and uses the best table the CPU supports.
#pragma once

#include <cstdint>
#include <vector>

namespace splitdec::simd {

struct KernelTable {
  const char* name;
  // sum_i a[i] * b[i]
  float (*dot_f32)(const float* a, const float* b, int n);
  // out[r] = sum_i x[r][i] * w[i] for 4 rows of x (w read once)
  void (*dot4_f32)(const float* const x[4], const float* w, int n, float out[4]);
  // the same with bf16 weights (expanded exactly to f32)
  void (*dot4_bf16)(const float* const x[4], const uint16_t* w, int n, float out[4]);
  float (*dot_bf16)(const float* x, const uint16_t* w, int n);
  // the same with f16 weights
  void (*dot4_f16)(const float* const x[4], const uint16_t* w, int n, float out[4]);
  float (*dot_f16)(const float* x, const uint16_t* w, int n);
  // dst[i] = w[i] expanded exactly to f32 (weight rows for the GEMM panels)
  void (*expand_bf16)(const uint16_t* w, int n, float* dst);
  void (*expand_f16)(const uint16_t* w, int n, float* dst);
  // Q8_0 weights (weight_matrix.h): n / 32 blocks of {f16 scale d, int8
  // q[32]}, w = d * q. Each block's sum_j x[j] q[j] is taken first, then
  // scaled by d and added in block order; dot4 sums each row exactly as dot.
  float (*dot_q8)(const float* x, const uint8_t* w, int n);
  void (*dot4_q8)(const float* const x[4], const uint8_t* w, int n, float out[4]);
  void (*expand_q8)(const uint8_t* w, int n, float* dst);
  // Q8_0 weights against an activation row quantized the same way (llama.cpp's
  // q8_0 x q8_0 dot): x_scale[n / 32] f32 scales, x_q[n] int8. Integer
  // products are summed exactly (within a block: in 8 lanes on the SIMD
  // tables, whole in the scalar one), scaled by x_scale * d in f32 and
  // accumulated over blocks; dot4 sums each row exactly as dot.
  float (*dot_q8_q8)(const float* x_scale, const int8_t* x_q, const uint8_t* w, int n);
  void (*dot4_q8_q8)(const float* const x_scale[4], const int8_t* const x_q[4], const uint8_t* w, int n, float out[4]);
  // An activation row to that form: per `block` values (32, or 256 for the
  // K-quants' Q8_K form; it divides n) s = max |x| / 127, q = round half to
  // even of x * (127 / max |x|) (ONNX Runtime's MLAS int8 form, bit for bit):
  // x_scale[n / block].
  void (*quantize_q8_activations)(const float* x, int n, int block, float* x_scale, int8_t* x_q);
  // Q4_0 weights (weight_matrix.h): n / 32 blocks of {f16 d, 16 bytes of
  // nibbles}, w = d * (nibble - 8); each the same as its Q8_0 kernel above
  // (the same sums in the same order), over those values.
  float (*dot_q4)(const float* x, const uint8_t* w, int n);
  void (*dot4_q4)(const float* const x[4], const uint8_t* w, int n, float out[4]);
  void (*expand_q4)(const uint8_t* w, int n, float* dst);
  float (*dot_q4_q8)(const float* x_scale, const int8_t* x_q, const uint8_t* w, int n);
  void (*dot4_q4_q8)(const float* const x_scale[4], const int8_t* const x_q[4], const uint8_t* w, int n, float out[4]);
  // y[i] = y[i] * s + a * x[i]
  void (*scale_axpy)(float* y, float s, float a, const float* x, int n);
  // sum of a large buffer (memory bandwidth probe)
  double (*sum_f32)(const float* x, int64_t n);
  // Online-softmax attention over `n` consecutive keys for the `group` query
  // heads that share them: q [group][hd]; k, v [n][hd]; running max m,
  // running sum l [group] and unnormalised output acc [group][hd] are updated.
  // Keys are taken in blocks: one vector exp per block, one rescale per block.
  // softcap > 0 caps each score as softcap * tanh(score / softcap).
  void (*attend_keys)(const float* q, int group, int hd, float scale, float softcap, const float* k, const float* v, int n,
                      float* m, float* l, float* acc);
  // The same over bf16 keys and values (expanded exactly to f32).
  void (*attend_keys_bf16)(const float* q, int group, int hd, float scale, float softcap, const uint16_t* k,
                           const uint16_t* v, int n, float* m, float* l, float* acc);
  // The same over f16 keys and values.
  void (*attend_keys_f16)(const float* q, int group, int hd, float scale, float softcap, const uint16_t* k,
                          const uint16_t* v, int n, float* m, float* l, float* acc);
  // The same over int8 keys and values with one f32 scale per row (--kv-dtype
  // q8): key j is k_scale[j] * k[j], value j v_scale[j] * v[j]; the key
  // scale multiplies the score, the value scale the probability.
  void (*attend_keys_q8)(const float* q, int group, int hd, float scale, float softcap, const int8_t* k, const float* k_scale,
                         const int8_t* v, const float* v_scale, int n, float* m, float* l, float* acc);
  // dst[r][:] = scale[r] * x[r][:] for `rows` int8 rows of hd values (q8 KV tiles).
  void (*expand_q8_rows)(const int8_t* x, const float* scale, int rows, int hd, float* dst);

  // ---- flash attention tiles (kernels/flash_attention.cpp) ----
  // A register-blocked product, any m, n, k >= 0:
  //   C = A B                       (c_scale == nullptr)
  //   C = diag(c_scale) C + A B     (otherwise; one scale per row of C)
  // A(i, p) = a[i * a_row + p * a_col], so A may be row- or column-major;
  // B is row-major [k][ldb], C row-major [m][ldc]. Each C element is one
  // multiply-add chain over p in order, whatever the blocking, so a row's
  // result does not depend on which other rows share the call.
  void (*gemm_f32)(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c,
                   int64_t ldc, const float* c_scale);
  // The online-softmax step of one score tile, stored key-major: s [n keys][ld],
  // column i = one query row (m columns, m a multiple of 16, arrays sized m).
  // softcap > 0 first caps each score. When `masked`, column i sees key j only
  // if lo[i] <= key0 + j < hi[i] (positions relative to any common base).
  // Updates the running max mx[i] and sum l[i], writes the rescale factor of
  // the column's earlier output to c[i], and replaces s by the probabilities
  // (exactly 0 for hidden keys; a column with nothing visible yet stays at
  // mx = -inf, l = 0).
  void (*flash_softmax)(float* s, int64_t ld, int n, int m, int32_t key0, const int32_t* lo, const int32_t* hi, bool masked,
                        float softcap, float* mx, float* l, float* c);

  // ---- added last, so that an older revision's table still builds against
  // this struct for the in-process A/B (bench/ab) ----
  // out[j] = x . w_j for two weight rows against one x (the decode matvec's
  // single row): each row summed exactly as dot_* sums it, so the pairing
  // never changes a result; four FMA chains in flight instead of two.
  void (*dot2_f32)(const float* x, const float* w0, const float* w1, int n, float out[2]);
  void (*dot2_bf16)(const float* x, const uint16_t* w0, const uint16_t* w1, int n, float out[2]);
  void (*dot2_f16)(const float* x, const uint16_t* w0, const uint16_t* w1, int n, float out[2]);
  // out[r] = x_r . w0 and out[4 + r] = x_r . w1 for four x rows against two
  // weight rows (a batched decode of four or more sequences): each pair
  // summed exactly as dot_* sums it, two weight streams per call as dot2
  // gives a single row.
  void (*dot4x2_f32)(const float* const x[4], const float* w0, const float* w1, int n, float out[8]);
  void (*dot4x2_bf16)(const float* const x[4], const uint16_t* w0, const uint16_t* w1, int n, float out[8]);
  void (*dot4x2_f16)(const float* const x[4], const uint16_t* w0, const uint16_t* w1, int n, float out[8]);
  // dot4x2 keeps its 16 accumulators in registers and reads the two weight
  // rows once (AVX-512); false where it takes two rows twice (AVX2, generic).
  bool dot4x2_single_pass;
};

// The best table for this CPU (SPLITDEC_SIMD=generic|avx2|avx512 overrides, for testing).
const KernelTable& best();
// Every table this CPU can run, generic first.
std::vector<const KernelTable*> available();

// Per-target tables, defined in their translation units.
const KernelTable& generic_table();
const KernelTable& avx2_table();
const KernelTable& avx512_table();

}  // namespace splitdec::simd
