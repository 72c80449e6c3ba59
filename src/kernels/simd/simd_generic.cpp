// Scalar versions: the fallback, and the baseline the SIMD tables are tested against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

namespace {
inline float bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float dot_f32(const float* a, const float* b, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void dot4_f32(const float* const x[4], const float* w, int n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_f32(x[r], w, n);
}
float dot_bf16(const float* x, const uint16_t* w, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * bf16(w[i]);
  return s;
}
void dot4_bf16(const float* const x[4], const uint16_t* w, int n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_bf16(x[r], w, n);
}
float dot_f16(const float* x, const uint16_t* w, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * f16_to_f32(w[i]);
  return s;
}
void dot4_f16(const float* const x[4], const uint16_t* w, int n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_f16(x[r], w, n);
}
void dot2_f32(const float* x, const float* w0, const float* w1, int n, float out[2]) {
  out[0] = dot_f32(x, w0, n), out[1] = dot_f32(x, w1, n);
}
void dot2_bf16(const float* x, const uint16_t* w0, const uint16_t* w1, int n, float out[2]) {
  out[0] = dot_bf16(x, w0, n), out[1] = dot_bf16(x, w1, n);
}
void dot2_f16(const float* x, const uint16_t* w0, const uint16_t* w1, int n, float out[2]) {
  out[0] = dot_f16(x, w0, n), out[1] = dot_f16(x, w1, n);
}
void dot4x2_f32(const float* const x[4], const float* w0, const float* w1, int n, float out[8]) {
  dot4_f32(x, w0, n, out), dot4_f32(x, w1, n, out + 4);
}
void dot4x2_bf16(const float* const x[4], const uint16_t* w0, const uint16_t* w1, int n, float out[8]) {
  dot4_bf16(x, w0, n, out), dot4_bf16(x, w1, n, out + 4);
}
void dot4x2_f16(const float* const x[4], const uint16_t* w0, const uint16_t* w1, int n, float out[8]) {
  dot4_f16(x, w0, n, out), dot4_f16(x, w1, n, out + 4);
}
void expand_bf16(const uint16_t* w, int n, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = bf16(w[i]);
}
void expand_f16(const uint16_t* w, int n, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = f16_to_f32(w[i]);
}
// Block formats: per block sum_j x[j] q[j], scaled by d, added in block
// order. value(block, j) is the block's j-th weight before scaling.
float block_scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return f16_to_f32(h);
}
struct Q8Block {
  static constexpr int kBytes = 34;
  static int value(const uint8_t* block, int j) { return int8_t(block[2 + j]); }
};
struct Q4Block {
  static constexpr int kBytes = 18;
  static int value(const uint8_t* block, int j) { return (j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4) - 8; }
};
template <class B>
float dot_blocks(const float* x, const uint8_t* w, int n) {
  float s = 0;
  for (int b = 0; b * 32 < n; ++b) {
    const uint8_t* block = w + int64_t(b) * B::kBytes;
    float t = 0;
    for (int j = 0; j < 32; ++j) t += x[b * 32 + j] * float(B::value(block, j));
    s += block_scale(block) * t;
  }
  return s;
}
template <class B>
void expand_blocks(const uint8_t* w, int n, float* dst) {
  for (int b = 0; b * 32 < n; ++b) {
    const uint8_t* block = w + int64_t(b) * B::kBytes;
    const float d = block_scale(block);
    for (int j = 0; j < 32; ++j) dst[b * 32 + j] = d * float(B::value(block, j));
  }
}
// Against q8_0 activations: exact integer block sums, scaled and added in block order.
template <class B>
float dot_q8act(const float* xs, const int8_t* xq, const uint8_t* w, int n) {
  float even = 0, odd = 0;
  for (int b = 0; b * 32 < n; ++b) {
    const uint8_t* block = w + int64_t(b) * B::kBytes;
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += int32_t(xq[b * 32 + j]) * B::value(block, j);
    (b % 2 ? odd : even) += float(isum) * (xs[b] * block_scale(block));
  }
  return even + odd;
}
// Four rows, each exactly as one.
template <class B>
void dot4_blocks(const float* const x[4], const uint8_t* w, int n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_blocks<B>(x[r], w, n);
}
template <class B>
void dot4_q8act(const float* const xs[4], const int8_t* const xq[4], const uint8_t* w, int n, float out[4]) {
  for (int r = 0; r < 4; ++r) out[r] = dot_q8act<B>(xs[r], xq[r], w, n);
}
constexpr auto dot_q8 = dot_blocks<Q8Block>, dot_q4 = dot_blocks<Q4Block>;
constexpr auto dot4_q8 = dot4_blocks<Q8Block>, dot4_q4 = dot4_blocks<Q4Block>;
constexpr auto expand_q8 = expand_blocks<Q8Block>, expand_q4 = expand_blocks<Q4Block>;
constexpr auto dot_q8_q8 = dot_q8act<Q8Block>, dot_q4_q8 = dot_q8act<Q4Block>;
constexpr auto dot4_q8_q8 = dot4_q8act<Q8Block>, dot4_q4_q8 = dot4_q8act<Q4Block>;
void quantize_q8_activations(const float* x, int n, int block, float* xs, int8_t* xq) {
  for (int b = 0; b < n / block; ++b) {
    const float* xb = x + int64_t(b) * block;
    float amax = 0;
    bool nan = false;
    for (int j = 0; j < block; ++j) amax = std::max(amax, std::abs(xb[j])), nan |= xb[j] != xb[j];
    const float s = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.f;  // NaN propagates
    // 127 / amax in one division, not 1 / s: ONNX Runtime's int8 MatMulNBits
    // (MLAS) forms it so, and the two differ by an ulp that can move a value
    // on a half-integer to the next integer.
    const float inv = s >= std::numeric_limits<float>::min() ? 127.f / amax : 0.f;
    xs[b] = s;
    for (int j = 0; j < block; ++j) {
      const float r = std::nearbyint(xb[j] * inv);
      xq[int64_t(b) * block + j] = r != r ? 0 : int8_t(std::clamp(r, -127.f, 127.f));  // NaN: a NaN or infinite activation
    }
  }
}
void scale_axpy(float* y, float s, float a, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] = y[i] * s + a * x[i];
}
double sum_f32(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
struct F16 {  // f16 bits, a distinct type from bf16's uint16_t
  uint16_t bits;
};
template <class T>
inline float as_f32(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, F16>) return f16_to_f32(x.bits);
  else if constexpr (std::is_same_v<T, int8_t>) return float(x);
  else return bf16(x);
}

// int8 rows (q8 KV) carry one scale per row, ks[j] / vs[j] (null otherwise).
template <class T>
void attend_keys_t(const float* q, int group, int hd, float scale, float softcap, const T* k, const float* ks, const T* v,
                   const float* vs, int n, float* m, float* l, float* acc) {
  for (int j = 0; j < n; ++j)
    for (int g = 0; g < group; ++g) {
      float s = 0;
      for (int d = 0; d < hd; ++d) s += q[g * hd + d] * as_f32(k[int64_t(j) * hd + d]);
      s *= ks ? scale * ks[j] : scale;
      const float w = vs ? vs[j] : 1.f;
      if (softcap > 0) s = softcap * std::tanh(s / softcap);
      float* a = acc + int64_t(g) * hd;
      const T* vj = v + int64_t(j) * hd;
      if (s > m[g]) {
        const float c = std::exp(m[g] - s);
        l[g] = l[g] * c + 1.f;
        m[g] = s;
        for (int d = 0; d < hd; ++d) a[d] = a[d] * c + w * as_f32(vj[d]);
      } else {
        const float e = std::exp(s - m[g]);
        l[g] += e;
        for (int d = 0; d < hd; ++d) a[d] += e * w * as_f32(vj[d]);
      }
    }
}
void attend_keys(const float* q, int group, int hd, float scale, float softcap, const float* k, const float* v, int n, float* m, float* l,
                 float* acc) {
  attend_keys_t(q, group, hd, scale, softcap, k, nullptr, v, nullptr, n, m, l, acc);
}
void attend_keys_bf16(const float* q, int group, int hd, float scale, float softcap, const uint16_t* k, const uint16_t* v, int n, float* m,
                      float* l, float* acc) {
  attend_keys_t(q, group, hd, scale, softcap, k, nullptr, v, nullptr, n, m, l, acc);
}
void attend_keys_f16(const float* q, int group, int hd, float scale, float softcap, const uint16_t* k, const uint16_t* v, int n,
                     float* m, float* l, float* acc) {
  attend_keys_t(q, group, hd, scale, softcap, reinterpret_cast<const F16*>(k), nullptr, reinterpret_cast<const F16*>(v), nullptr, n,
                m, l, acc);
}
void attend_keys_q8(const float* q, int group, int hd, float scale, float softcap, const int8_t* k, const float* ks, const int8_t* v,
                    const float* vs, int n, float* m, float* l, float* acc) {
  attend_keys_t(q, group, hd, scale, softcap, k, ks, v, vs, n, m, l, acc);
}
void expand_q8_rows(const int8_t* x, const float* scale, int rows, int hd, float* dst) {
  for (int r = 0; r < rows; ++r)
    for (int d = 0; d < hd; ++d) dst[int64_t(r) * hd + d] = scale[r] * float(x[int64_t(r) * hd + d]);
}

// Row by row; the innermost loop runs along a row of B and C, which the
// compiler vectorises with the baseline SSE2.
void gemm_f32(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
              const float* c_scale) {
  for (int i = 0; i < m; ++i) {
    float* ci = c + int64_t(i) * ldc;
    for (int j = 0; j < n; ++j) ci[j] = c_scale ? ci[j] * c_scale[i] : 0.f;
    for (int p = 0; p < k; ++p) {
      const float aip = a[int64_t(i) * a_row + int64_t(p) * a_col];
      const float* bp = b + int64_t(p) * ldb;
      for (int j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

void flash_softmax(float* s, int64_t ld, int n, int m, int32_t key0, const int32_t* lo, const int32_t* hi, bool masked, float softcap,
                   float* mx, float* l, float* c) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < m; ++i) {
    auto seen = [&](int j) { return !masked || (lo[i] <= key0 + j && key0 + j < hi[i]); };
    float tmax = -inf;
    for (int j = 0; j < n; ++j) {
      float& x = s[int64_t(j) * ld + i];
      if (softcap > 0) x = softcap * std::tanh(x / softcap);
      if (seen(j)) tmax = std::max(tmax, x);
    }
    const float m_new = std::max(mx[i], tmax);
    c[i] = mx[i] == -inf ? 0.f : std::exp(mx[i] - m_new);
    float sum = 0;
    for (int j = 0; j < n; ++j) {
      float& x = s[int64_t(j) * ld + i];
      x = seen(j) ? std::exp(x - m_new) : 0.f;
      sum += x;
    }
    l[i] = l[i] * c[i] + sum;
    mx[i] = m_new;
  }
}
}  // namespace

const KernelTable& generic_table() {
  static const KernelTable t{"generic",   dot_f32,     dot4_f32, dot4_bf16,   dot_bf16,         dot4_f16,
                             dot_f16,     expand_bf16, expand_f16, dot_q8,     dot4_q8,          expand_q8,
                             dot_q8_q8,   dot4_q8_q8,  quantize_q8_activations,
                             dot_q4,      dot4_q4,     expand_q4,  dot_q4_q8,  dot4_q4_q8,
                             scale_axpy,  sum_f32,     attend_keys,
                             attend_keys_bf16, attend_keys_f16, attend_keys_q8, expand_q8_rows, gemm_f32, flash_softmax,
                             dot2_f32,    dot2_bf16,   dot2_f16,    dot4x2_f32,  dot4x2_bf16, dot4x2_f16,  false};
  return t;
}

}  // namespace splitdec::simd
