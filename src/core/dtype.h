// Element types of weights and caches, and conversions to and from f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace splitdec {

// I8 and U8 hold quantized weights only (`splitdec quantize` files: block
// values beside their scales); everything that reads values needs a float.
enum class DType { F32, BF16, F16, I8, U8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::I8:
    case DType::U8: return 1;
  }
  return 0;
}
inline bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
  }
  return "?";
}

// "f32" | "bf16" | "f16" given to `flag` (named in the error); InputError otherwise.
inline DType parse_dtype_flag(const std::string& flag, const std::string& value) {
  if (value == "f32") return DType::F32;
  if (value == "bf16") return DType::BF16;
  if (value == "f16") return DType::F16;
  throw InputError(flag + " " + value + " is not supported (f32, bf16, f16 are)");
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | uint32_t(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even f32 -> f16 (used by make-model and KV storage).
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (absx >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                   // subnormal or zero
    if (absx < 0x33000000u) return uint16_t(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 + (113 - e) - 1
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t m = absx & 0x7fffffu;
  uint32_t h = e << 10 | m >> 13;
  uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// Reads one element of `t` at `p` as f32 (a float type).
inline float load_as_f32(DType t, const void* p) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_f32(h);
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    }
    case DType::I8:
    case DType::U8: break;
  }
  return 0.f;
}

// f32 value rounded to what `t` can hold (HF casts constants such as the
// embedding scale to the weight dtype; we reproduce that).
inline float round_to_dtype(float f, DType t) {
  switch (t) {
    case DType::F32: return f;
    case DType::BF16: return bf16_to_f32(f32_to_bf16(f));
    case DType::F16: return f16_to_f32(f32_to_f16(f));
    case DType::I8:
    case DType::U8: break;
  }
  return f;
}

}  // namespace splitdec
