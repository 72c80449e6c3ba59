// AVX512_BF16 GEMM pieces (gemm_bf16_avx512.h). vdpbf16ps adds, to each of
// 16 f32 lanes, the products of one bf16 pair of each operand; here one
// operand is an x pair broadcast to all lanes and the other 16 weight rows'
// pairs side by side, so a zmm holds 16 outputs of one row, summed over k
// pairs in order with no horizontal reduction at the end.
#include "kernels/simd/gemm_bf16_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace splitdec::simd {

namespace {

// Pairs per k block: a 32-output strip's block is 32 KiB, kept in L1 while
// every row block streams past it (the x block of 12 rows is 12 KiB).
constexpr int kBlockPairs = 256;
// Rows per register tile: 12 rows x 2 zmm = 24 accumulators, enough
// independent sums to cover vdpbf16ps's latency on both FMA pipes.
constexpr int kTileRows = 12;

__mmask32 first_bits32(int n) { return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }
__mmask16 first_bits16(int n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// r[i] (16 dwords of row i) becomes column i: r[c][i] = old r[i][c].
void transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[4q + e], 128-bit lane L: element 4L + e of rows 4q..4q+3.
  for (int e = 0; e < 4; ++e) {
    const __m512i v_lo = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), v_hi = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xdd);
    const __m512i w_lo = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88), w_hi = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xdd);
    r[e] = _mm512_shuffle_i32x4(v_lo, w_lo, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(v_lo, w_lo, 0xdd);
    r[4 + e] = _mm512_shuffle_i32x4(v_hi, w_hi, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(v_hi, w_hi, 0xdd);
  }
}

// Rows x (16 * Vecs) outputs over `pairs` k pairs: y = (accumulate ? y : 0)
// + x . b, the last zmm's stores masked to `last`.
template <int Rows, int Vecs>
void tile(const uint32_t* x, int64_t x_stride, const uint32_t* b, int pairs, float* y, int64_t ldy, bool accumulate, __mmask16 last) {
  __m512 acc[Rows][Vecs];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vecs; ++v) {
      const __mmask16 m = v == Vecs - 1 ? last : __mmask16(0xffff);
      acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(m, y + r * ldy + 16 * v) : _mm512_setzero_ps();
    }
  for (int p = 0; p < pairs; ++p) {
    __m512bh w[Vecs];
#pragma GCC unroll 2
    for (int v = 0; v < Vecs; ++v) w[v] = (__m512bh)_mm512_load_si512(b + (p * Vecs + v) * 16);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512bh xr = (__m512bh)_mm512_set1_epi32(int(x[r * x_stride + p]));
#pragma GCC unroll 2
      for (int v = 0; v < Vecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xr, w[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vecs; ++v) {
      const __mmask16 m = v == Vecs - 1 ? last : __mmask16(0xffff);
      _mm512_mask_storeu_ps(y + r * ldy + 16 * v, m, acc[r][v]);
    }
}

using TileFn = void (*)(const uint32_t*, int64_t, const uint32_t*, int, float*, int64_t, bool, __mmask16);

template <int Vecs, size_t... R>
constexpr std::array<TileFn, sizeof...(R)> tiles_for(std::index_sequence<R...>) {
  return {&tile<int(R) + 1, Vecs>...};
}
// kTiles[vecs - 1][rows - 1]
constexpr std::array<std::array<TileFn, kTileRows>, 2> kTiles = {tiles_for<1>(std::make_index_sequence<kTileRows>()),
                                                                  tiles_for<2>(std::make_index_sequence<kTileRows>())};

// Values k .. k + 31 of weight row `row` as 16 bf16 pairs (zeros past
// `in`). Blocks start at k (a multiple of 32 and of the block).
template <PanelWeights F>
__m512i weight_pairs(const uint8_t* w, int64_t row_bytes, int in, int64_t row, int64_t k) {
  const uint8_t* r = w + row * row_bytes;
  if constexpr (F == PanelWeights::BF16) {
    return _mm512_maskz_loadu_epi16(first_bits32(int(in - k)), r + 2 * k);
  } else if constexpr (F == PanelWeights::F16) {
    const __m512i h = _mm512_maskz_loadu_epi16(first_bits32(int(in - k)), r + 2 * k);
    const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h)), hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  } else {
    constexpr int kBytes = F == PanelWeights::Q8_0 ? 34 : 18;
    const uint8_t* block = r + k / 32 * kBytes;
    uint16_t hd;
    __builtin_memcpy(&hd, block, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(hd));
    __m512i lo, hi;  // values 0..15 and 16..31 as int32
    if constexpr (F == PanelWeights::Q8_0) {
      lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
      hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)));
    } else {  // value j the low nibble of byte j, value j + 16 the high one, stored + 8
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)), low4 = _mm_set1_epi8(15);
      const __m512i eight = _mm512_set1_epi32(8);
      lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(bytes, low4)), eight);
      hi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), low4)), eight);
    }
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(d, _mm512_cvtepi32_ps(hi)), _mm512_mul_ps(d, _mm512_cvtepi32_ps(lo)));
  }
}

// Packs k block [k0, k0 + kc) pairs of the panel's n rows from o0: strip
// j0 / 32 at scratch + j0 * kc, [kc][width]. Per block rather than whole,
// so that it stays in L2.
template <PanelWeights F>
void pack_block(const uint8_t* w, int64_t row_bytes, int in, int o0, int n, int k0, int kc, uint32_t* scratch) {
  for (int j0 = 0; j0 < n; j0 += kBf16StripOutputs) {
    const int width = n - j0 > 16 ? 32 : 16;
    uint32_t* strip = scratch + int64_t(j0) * kc;
    for (int g = 0; g < width; g += 16)
      for (int p0 = 0; p0 < kc; p0 += 16) {
        // 16 weight rows x 16 pairs; an odd `in`'s last pair is loaded half.
        const int64_t k = 2 * int64_t(k0 + p0);
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          const int j = j0 + g + i;
          r[i] = j < n ? weight_pairs<F>(w, row_bytes, in, int64_t(o0) + j, k) : _mm512_setzero_si512();
        }
        transpose16x16(r);
        for (int c = 0; c < 16 && p0 + c < kc; ++c) _mm512_store_si512(strip + int64_t(p0 + c) * width + g, r[c]);
      }
  }
}

// 32 stored 16-bit weights as 16 bf16 pairs: bf16 as they are, f16 widened
// and rounded to nearest even (as the packer's weight_pairs).
template <PanelWeights F>
__m512bh stored_pairs(__m512i h) {
  static_assert(F == PanelWeights::BF16 || F == PanelWeights::F16);
  if constexpr (F == PanelWeights::BF16) return (__m512bh)h;
  else return _mm512_cvtne2ps_pbh(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), _mm512_cvtph_ps(_mm512_castsi512_si256(h)));
}

// R (<= 4) rows x C weight rows of matvec_bf16_products: out[c][r].
template <PanelWeights F, int R, int C>
void dot_bf16_products(const uint32_t* const x[], const uint16_t* const w[C], int in, float out[C][4]) {
  __m512 a0[C][R], a1[C][R];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) a0[c][r] = _mm512_setzero_ps(), a1[c][r] = _mm512_setzero_ps();
  const int pairs = (in + 1) / 2;
  int p = 0;
  // 64 values a step, one into each accumulator; only whole steps within
  // `in`, as an odd row's last pair would read its neighbour (or past the
  // buffer: 0 x NaN is NaN).
  for (; 2 * p + 64 <= in; p += 32) {
    __m512bh w0[C], w1[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      // 1 KiB ahead, as the exact kernels' prefetch_ahead (formed as an
      // integer: the address may lie past the row).
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(w[c] + 2 * p) + 1024;
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64), _MM_HINT_T0);
      w0[c] = stored_pairs<F>(_mm512_loadu_si512(w[c] + 2 * p));
      w1[c] = stored_pairs<F>(_mm512_loadu_si512(w[c] + 2 * p + 32));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh x0 = (__m512bh)_mm512_loadu_si512(x[r] + p), x1 = (__m512bh)_mm512_loadu_si512(x[r] + p + 16);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a0[c][r] = _mm512_dpbf16_ps(a0[c][r], x0, w0[c]), a1[c][r] = _mm512_dpbf16_ps(a1[c][r], x1, w1[c]);
    }
  }
  for (; p < pairs; p += 16) {  // the rest, 16 pairs at a time, into the first
    const __mmask16 mp = first_bits16(pairs - p);
    const __mmask32 mv = first_bits32(in - 2 * p);  // an odd `in`'s last pair is loaded half
    __m512bh wv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) wv[c] = stored_pairs<F>(_mm512_maskz_loadu_epi16(mv, w[c] + 2 * p));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi32(mp, x[r] + p);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a0[c][r] = _mm512_dpbf16_ps(a0[c][r], xv, wv[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) out[c][r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[c][r], a1[c][r]));
}

// Every row of x against C weight rows: rows in groups of four, the last
// group smaller; each (row, output) summed by dot_bf16_products alike.
template <PanelWeights F, int C>
void rows_against(const uint32_t* x, int rows, int64_t x_stride, const uint16_t* const w[C], int in, const int64_t o[C], float* y,
                  int64_t ldy) {
  for (int r0 = 0; r0 < rows; r0 += 4) {
    const int n = std::min(4, rows - r0);
    const uint32_t* xs[4];
    for (int r = 0; r < n; ++r) xs[r] = x + int64_t(r0 + r) * x_stride;
    float out[C][4];
    switch (n) {
      case 4: dot_bf16_products<F, 4, C>(xs, w, in, out); break;
      case 3: dot_bf16_products<F, 3, C>(xs, w, in, out); break;
      case 2: dot_bf16_products<F, 2, C>(xs, w, in, out); break;
      default: dot_bf16_products<F, 1, C>(xs, w, in, out); break;
    }
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < n; ++r) y[int64_t(r0 + r) * ldy + o[c]] = out[c][r];
  }
}

template <PanelWeights F>
void matvec_with(const uint32_t* x, int rows, int64_t x_stride, const uint16_t* w, int in, int64_t o0, int64_t o1, float* y,
                 int64_t ldy) {
  const int64_t half = (o1 - o0) / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t o[2] = {o0 + i, o0 + half + i};
    const uint16_t* wr[2] = {w + o[0] * in, w + o[1] * in};
    rows_against<F, 2>(x, rows, x_stride, wr, in, o, y, ldy);
  }
  if ((o1 - o0) % 2) {  // an odd range's last output
    const int64_t o[1] = {o1 - 1};
    const uint16_t* wr[1] = {w + o[0] * in};
    rows_against<F, 1>(x, rows, x_stride, wr, in, o, y, ldy);
  }
}

}  // namespace

void matvec_bf16_products(const uint32_t* x, int rows, int64_t x_stride, const uint16_t* w, PanelWeights format, int in, int64_t o0,
                          int64_t o1, float* y, int64_t ldy) {
  if (format == PanelWeights::F16) matvec_with<PanelWeights::F16>(x, rows, x_stride, w, in, o0, o1, y, ldy);
  else matvec_with<PanelWeights::BF16>(x, rows, x_stride, w, in, o0, o1, y, ldy);
}

void bf16_pairs_from_f32(const float* x, int in, uint32_t* dst) {
  int i = 0;
  for (; i + 32 <= in; i += 32) {
    const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(dst + i / 2, (__m512i)h);
  }
  if (i < in) {  // zeros past `in` become zero halves
    const int left = in - i;
    const __m512 lo = _mm512_maskz_loadu_ps(first_bits16(left), x + i);
    const __m512 hi = _mm512_maskz_loadu_ps(first_bits16(left - 16 > 0 ? left - 16 : 0), x + i + 16);
    _mm512_mask_storeu_epi32(dst + i / 2, first_bits16((left + 1) / 2), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

size_t bf16_panel_scratch_words(int n) { return size_t((n + kBf16StripOutputs - 1) / kBf16StripOutputs) * kBf16StripOutputs * kBlockPairs; }

void gemm_bf16_panel(const uint32_t* x, int rows, const uint8_t* w, int64_t row_bytes, PanelWeights format, int in, int o0, int n,
                     float* y, int64_t ldy, uint32_t* scratch) {
  const int pairs = (in + 1) / 2;
  if (pairs == 0)  // no k block would write y: the empty sum
    for (int r = 0; r < rows; ++r) std::fill(y + r * ldy, y + r * ldy + n, 0.f);
  for (int k0 = 0; k0 < pairs; k0 += kBlockPairs) {
    const int kc = std::min(kBlockPairs, pairs - k0);
    switch (format) {
      case PanelWeights::BF16: pack_block<PanelWeights::BF16>(w, row_bytes, in, o0, n, k0, kc, scratch); break;
      case PanelWeights::F16: pack_block<PanelWeights::F16>(w, row_bytes, in, o0, n, k0, kc, scratch); break;
      case PanelWeights::Q8_0: pack_block<PanelWeights::Q8_0>(w, row_bytes, in, o0, n, k0, kc, scratch); break;
      case PanelWeights::Q4_0: pack_block<PanelWeights::Q4_0>(w, row_bytes, in, o0, n, k0, kc, scratch); break;
    }
    for (int j0 = 0; j0 < n; j0 += kBf16StripOutputs) {
      const int left = n - j0, vecs = left > 16 ? 2 : 1;
      const __mmask16 last = first_bits16(left - 16 * (vecs - 1));
      const uint32_t* b = scratch + int64_t(j0) * kc;
      // Rows in tiles of near-equal height (16 rows: 8 + 8, not 12 + 4), so
      // that no tile is left with too few accumulators to hide the latency.
      const int tiles = (rows + kTileRows - 1) / kTileRows;
      for (int t = 0, r0 = 0; t < tiles; ++t) {
        const int mr = (rows - r0) / (tiles - t) + ((rows - r0) % (tiles - t) != 0);
        kTiles[size_t(vecs - 1)][size_t(mr - 1)](x + int64_t(r0) * pairs + k0, pairs, b, kc, y + int64_t(r0) * ldy + j0, ldy, k0 > 0, last);
        r0 += mr;
      }
    }
  }
}

}  // namespace splitdec::simd
