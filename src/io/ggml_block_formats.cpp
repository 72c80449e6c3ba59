#include "io/ggml_block_formats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"

namespace splitdec {

// Q4_K / Q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes.
void k_quant_scale_min(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

namespace {

constexpr int QK = 32, QK_K = 256;

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
void put_half(uint8_t* p, float x) {
  const uint16_t h = f32_to_f16(x);
  std::memcpy(p, &h, 2);
}
int nearest(float x) { return int(std::lround(x)); }

void pack_scale_min_k4(const int* sc, const int* mn, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = uint8_t(sc[j]);
      q[j + 4] = uint8_t(mn[j]);
    } else {
      q[j + 4] = uint8_t((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      q[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      q[j] |= uint8_t((mn[j] >> 4) << 6);
    }
  }
}

// x = d * q + m over a block of 32 (Q4_1 / Q5_1): q in [0, levels].
void affine_levels(const float* x, int levels, float* d, float* m, int* q) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < QK; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  *d = (hi - lo) / float(levels);
  *m = lo;
  const float inv = *d > 0 ? 1.f / *d : 0.f;
  for (int i = 0; i < QK; ++i) q[i] = std::clamp(nearest((x[i] - lo) * inv), 0, levels);
}

// Q4_K / Q5_K: per 32-value sub-block a scale and a min, both 6-bit under
// the block's two f16 factors; q in [0, levels].
void k_affine(const float* x, int levels, uint8_t* d_dmin, uint8_t* scales, int* q) {
  float scale[8], min[8];
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = 0;  // the min is never above 0 (llama.cpp's make_qkx: min <= 0)
    for (int i = 0; i < 32; ++i) lo = std::min(lo, x[32 * j + i]), hi = std::max(hi, x[32 * j + i]);
    scale[j] = (hi - lo) / float(levels);
    min[j] = -lo;
  }
  const float max_scale = *std::max_element(scale, scale + 8), max_min = *std::max_element(min, min + 8);
  const float d = max_scale / 63.f, dmin = max_min / 63.f;
  put_half(d_dmin, d);
  put_half(d_dmin + 2, dmin);
  const float dh = half_at(d_dmin), dminh = half_at(d_dmin + 2);  // as the reader will see them
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = dh > 0 ? std::clamp(nearest(scale[j] / dh), 0, 63) : 0;
    mn[j] = dminh > 0 ? std::clamp(nearest(min[j] / dminh), 0, 63) : 0;
  }
  pack_scale_min_k4(sc, mn, scales);
  for (int j = 0; j < 8; ++j) {
    const float step = dh * float(sc[j]), offset = dminh * float(mn[j]);
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = step > 0 ? std::clamp(nearest((x[32 * j + i] + offset) / step), 0, levels) : 0;
  }
}

void dequantize_block(GgmlBlocks f, const uint8_t* b, float* y) {
  switch (f) {
    case GgmlBlocks::Q4_1: {
      const float d = half_at(b), m = half_at(b + 2);
      const uint8_t* qs = b + 4;
      for (int j = 0; j < 16; ++j) y[j] = float(qs[j] & 0xF) * d + m, y[j + 16] = float(qs[j] >> 4) * d + m;
      return;
    }
    case GgmlBlocks::Q5_0:
    case GgmlBlocks::Q5_1: {
      const bool offset = f == GgmlBlocks::Q5_1;
      const float d = half_at(b), m = offset ? half_at(b + 2) : 0.f;
      const uint8_t* hp = b + (offset ? 4 : 2);
      const uint32_t qh = uint32_t(hp[0]) | uint32_t(hp[1]) << 8 | uint32_t(hp[2]) << 16 | uint32_t(hp[3]) << 24;
      const uint8_t* qs = hp + 4;
      const int shift = offset ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        const int x0 = int((qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) - shift;
        const int x1 = int((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - shift;
        y[j] = float(x0) * d + m;
        y[j + 16] = float(x1) * d + m;
      }
      return;
    }
    case GgmlBlocks::Q4_K:
    case GgmlBlocks::Q5_K: {
      const bool five = f == GgmlBlocks::Q5_K;
      const float d = half_at(b), dmin = half_at(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* q = b + (five ? 48 : 16);
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < QK_K; j += 64) {
        int sc, m;
        k_quant_scale_min(is, scales, &sc, &m);
        const float d1 = d * float(sc), m1 = dmin * float(m);
        k_quant_scale_min(is + 1, scales, &sc, &m);
        const float d2 = d * float(sc), m2 = dmin * float(m);
        for (int l = 0; l < 32; ++l) *y++ = d1 * float((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * float((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
        q += 32;
        is += 2;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      }
      return;
    }
    case GgmlBlocks::Q6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = half_at(b + 208);
      for (int n = 0; n < QK_K; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * float(sc[is]) * float(q1);
          y[l + 32] = d * float(sc[is + 2]) * float(q2);
          y[l + 64] = d * float(sc[is + 4]) * float(q3);
          y[l + 96] = d * float(sc[is + 6]) * float(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      return;
    }
  }
}

void quantize_block(GgmlBlocks f, const float* x, uint8_t* b) {
  switch (f) {
    case GgmlBlocks::Q4_1:
    case GgmlBlocks::Q5_1: {
      const bool five = f == GgmlBlocks::Q5_1;
      float d, m;
      int q[QK];
      affine_levels(x, five ? 31 : 15, &d, &m, q);
      put_half(b, d);
      put_half(b + 2, m);
      uint8_t* qs = b + (five ? 8 : 4);
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        qs[j] = uint8_t((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        qh |= uint32_t(q[j] >> 4) << j | uint32_t(q[j + 16] >> 4) << (j + 16);
      }
      if (five) std::memcpy(b + 4, &qh, 4);  // little-endian hosts only (x86-64)
      return;
    }
    case GgmlBlocks::Q5_0: {
      // llama.cpp's quantize_row_q5_0_ref: d = the value of largest magnitude / -16.
      float amax = 0, max = 0;
      for (int i = 0; i < QK; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
      const float d = max / -16.f, inv = d != 0 ? 1.f / d : 0.f;
      put_half(b, d);
      uint32_t qh = 0;
      uint8_t* qs = b + 6;
      for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(31, int(x[j] * inv + 16.5f)), q1 = std::min(31, int(x[j + 16] * inv + 16.5f));
        qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= uint32_t(q0 >> 4) << j | uint32_t(q1 >> 4) << (j + 16);
      }
      std::memcpy(b + 2, &qh, 4);
      return;
    }
    case GgmlBlocks::Q4_K:
    case GgmlBlocks::Q5_K: {
      const bool five = f == GgmlBlocks::Q5_K;
      int q[QK_K];
      k_affine(x, five ? 31 : 15, b, b + 4, q);
      uint8_t* qh = b + 16;
      uint8_t* qs = b + (five ? 48 : 16);
      if (five) std::memset(qh, 0, 32);
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) {
          const int lo = q[j + l], hi = q[j + l + 32];
          qs[l] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
          if (five) qh[l] = uint8_t(qh[l] | (lo > 15 ? u1 : 0) | (hi > 15 ? u2 : 0));
        }
        qs += 32;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      }
      return;
    }
    case GgmlBlocks::Q6_K: {
      // Per 16 values a signed scale (largest magnitude / -32), the 16
      // scales as int8 under one f16.
      float scale[16];
      float max_abs_scale = 0, max_scale = 0;
      for (int s = 0; s < 16; ++s) {
        float amax = 0, max = 0;
        for (int i = 0; i < 16; ++i)
          if (std::fabs(x[16 * s + i]) > amax) amax = std::fabs(x[16 * s + i]), max = x[16 * s + i];
        scale[s] = max / -32.f;
        if (std::fabs(scale[s]) > max_abs_scale) max_abs_scale = std::fabs(scale[s]), max_scale = scale[s];
      }
      const float d = max_scale / -128.f;
      put_half(b + 208, d);
      const float dh = half_at(b + 208);
      int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
      int q[QK_K];
      for (int s = 0; s < 16; ++s) {
        sc[s] = int8_t(dh != 0 ? std::clamp(nearest(scale[s] / dh), -128, 127) : 0);
        const float step = dh * float(sc[s]);
        for (int i = 0; i < 16; ++i) q[16 * s + i] = step != 0 ? std::clamp(nearest(x[16 * s + i] / step), -32, 31) + 32 : 32;
      }
      uint8_t* ql = b;
      uint8_t* qh = b + 128;
      for (int n = 0; n < QK_K; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int q1 = q[n + l], q2 = q[n + l + 32], q3 = q[n + l + 64], q4 = q[n + l + 96];
          ql[l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
          ql[l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
          qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
        ql += 64;
        qh += 32;
      }
      return;
    }
  }
}

}  // namespace

const GgmlBlockLayout& ggml_block_layout(GgmlBlocks format) {
  static const GgmlBlockLayout layouts[] = {
      {"Q4_1", ggml_type::Q4_1, 32, 20},   {"Q5_0", ggml_type::Q5_0, 32, 22},   {"Q5_1", ggml_type::Q5_1, 32, 24},
      {"Q4_K", ggml_type::Q4_K, 256, 144}, {"Q5_K", ggml_type::Q5_K, 256, 176}, {"Q6_K", ggml_type::Q6_K, 256, 210}};
  return layouts[size_t(format)];
}

bool ggml_blocks_of_type(uint32_t type, GgmlBlocks* format) {
  for (GgmlBlocks f : {GgmlBlocks::Q4_1, GgmlBlocks::Q5_0, GgmlBlocks::Q5_1, GgmlBlocks::Q4_K, GgmlBlocks::Q5_K, GgmlBlocks::Q6_K})
    if (ggml_block_layout(f).ggml_type == type) return *format = f, true;
  return false;
}

void dequantize_ggml_blocks(GgmlBlocks format, const uint8_t* blocks, float* out, int64_t n) {
  const GgmlBlockLayout& l = ggml_block_layout(format);
  for (int64_t i = 0; i < n / l.values; ++i) dequantize_block(format, blocks + size_t(i) * l.bytes, out + i * l.values);
}

void quantize_ggml_blocks(GgmlBlocks format, const float* values, uint8_t* blocks, int64_t n) {
  const GgmlBlockLayout& l = ggml_block_layout(format);
  std::vector<float> back(size_t(l.values));
  for (int64_t i = 0; i < n / l.values; ++i) {
    const float* x = values + i * l.values;
    uint8_t* b = blocks + size_t(i) * l.bytes;
    float amax = 0;
    for (int k = 0; k < l.values; ++k) {
      if (!std::isfinite(x[k])) throw InputError(std::string("a weight is NaN or infinite; it cannot be stored as ") + l.name);
      amax = std::max(amax, std::fabs(x[k]));
    }
    quantize_block(format, x, b);
    // The block's factors are f16: past their range (65504 times the
    // format's largest step) the block would read back as Inf or NaN.
    dequantize_block(format, b, back.data());
    if (!std::all_of(back.begin(), back.end(), [](float y) { return std::isfinite(y); })) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", double(amax));
      throw InputError(std::string("a block's largest weight ") + value + " is beyond " + l.name +
                       "'s range (its f16 factors reach 65504)");
    }
  }
}

}  // namespace splitdec
