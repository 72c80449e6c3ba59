#include "kv/kv_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/named_values.h"

namespace splitdec {

namespace {
constexpr NamedValue<KvStorage> kKvStorages[] = {
    {KvStorage::F32, "f32"}, {KvStorage::BF16, "bf16"}, {KvStorage::F16, "f16"}, {KvStorage::Q8, "q8"}};
}  // namespace

KvStorage parse_kv_storage(const std::string& name) { return parse_named(kKvStorages, name, "KV storage"); }

const char* kv_storage_name(KvStorage storage) { return name_of(kKvStorages, storage); }

DType kv_storage_dtype(KvStorage storage) {
  switch (storage) {
    case KvStorage::F32: return DType::F32;
    case KvStorage::BF16: return DType::BF16;
    case KvStorage::F16: return DType::F16;
    case KvStorage::Q8: return DType::I8;
  }
  throw InputError("no such KV storage");
}

size_t kv_row_bytes(DType storage, int head_dim) {
  return storage == DType::I8 ? size_t(head_dim) + sizeof(float) : size_t(head_dim) * dtype_size(storage);
}

float quantize_kv_row(const float* x, int hd, int8_t* q) {
  float amax = 0;
  bool nan = false;
  for (int d = 0; d < hd; ++d) amax = std::max(amax, std::abs(x[d])), nan |= x[d] != x[d];
  const float s = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.f;
  const float inv = s >= std::numeric_limits<float>::min() ? 1.f / s : 0.f;  // a subnormal scale: zeros
  for (int d = 0; d < hd; ++d) q[d] = int8_t(std::clamp(std::nearbyint(x[d] * inv), -127.f, 127.f));
  // NaN or Inf keeps its scale, so it reaches the output as in f32; a row too
  // small for a normal scale is zeros with scale 0.
  return inv == 0.f && std::isfinite(s) ? 0.f : s;
}

void round_trip_kv_row(DType storage, const float* x, int hd, float* out) {
  switch (storage) {
    case DType::BF16:
      for (int d = 0; d < hd; ++d) out[d] = bf16_to_f32(f32_to_bf16(x[d]));
      return;
    case DType::F16:
      for (int d = 0; d < hd; ++d) out[d] = f16_to_f32(f32_to_f16(x[d]));
      return;
    case DType::I8: {
      thread_local std::vector<int8_t> q;
      q.resize(size_t(hd));
      const float s = quantize_kv_row(x, hd, q.data());
      for (int d = 0; d < hd; ++d) out[d] = s * float(q[d]);
      return;
    }
    case DType::F32:
    case DType::U8:
      if (out != x) std::copy_n(x, hd, out);
      return;
  }
}

}  // namespace splitdec
