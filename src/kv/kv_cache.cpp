#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace splitdec {

int64_t sliding_slots(int window, int64_t capacity, int max_chunk) {
  return std::min(capacity, int64_t(window) + max_chunk);
}

KvMemory KvCache::plan(const ModelConfig& config, int batch, int64_t capacity, int max_chunk, DType dtype) {
  KvMemory m;
  for (int l = 0; l < config.num_layers; ++l) {
    const LayerSpec& s = config.layers[size_t(l)];
    if (s.kv_source != l) {
      ++m.shared_layers;
      continue;
    }
    const int64_t slots = s.window > 0 ? sliding_slots(s.window, capacity, max_chunk) : capacity;
    const size_t bytes = 2 * size_t(batch) * size_t(s.num_kv_heads) * size_t(slots) * size_t(s.head_dim) * dtype_size(dtype);
    if (s.type == LayerType::Sliding) ++m.sliding_layers, m.sliding_bytes += bytes, m.sliding_slots = slots;
    else ++m.full_layers, m.full_bytes += bytes, m.full_slots = slots;
  }
  return m;
}

KvCache::KvCache(const ModelConfig& config, int batch, int64_t capacity, int max_chunk, DType dtype)
    : config_(&config), batch_(batch), capacity_(capacity), max_chunk_(max_chunk), dtype_(dtype),
      buffers_(size_t(config.num_layers)) {

  for (int l = 0; l < config.num_layers; ++l) {
    if (!owns(l)) continue;
    const LayerSpec& s = config.layers[size_t(l)];
    Buffer& buf = buffers_[size_t(l)];
    buf.slots = s.window > 0 ? sliding_slots(s.window, capacity, max_chunk) : capacity;
    buf.ring = buf.slots < capacity;
    const size_t n = size_t(batch) * size_t(s.num_kv_heads) * size_t(buf.slots) * size_t(s.head_dim);
    if (dtype != DType::F32) {
      buf.k16.assign(n, 0);
      buf.v16.assign(n, 0);
    } else {
      buf.k.assign(n, 0.f);
      buf.v.assign(n, 0.f);
    }
  }
}

KvView KvCache::view(int layer) const {
  const int src = config_->layers[size_t(layer)].kv_source;
  const LayerSpec& s = config_->layers[size_t(src)];
  const Buffer& buf = buffers_[size_t(src)];
  if (dtype_ != DType::F32)
    return {nullptr,  nullptr,   batch_,         s.num_kv_heads,          s.head_dim, buf.slots, buf.ring, buf.k16.data(),
            buf.v16.data(), dtype_ == DType::F16};
  return {buf.k.data(), buf.v.data(), batch_, s.num_kv_heads, s.head_dim, buf.slots, buf.ring};
}

void KvCache::write(int layer, int64_t first, int n, const float* k, const float* v) {
  const LayerSpec& s = config_->layers[size_t(layer)];
  Buffer& buf = buffers_[size_t(layer)];
  const KvView at = view(layer);  // its offset() places a position in the ring
  const int H = s.num_kv_heads, hd = s.head_dim;
  for (int b = 0; b < batch_; ++b)
    for (int r = 0; r < n; ++r)
      for (int h = 0; h < H; ++h) {
        const size_t src = ((size_t(b) * size_t(n) + size_t(r)) * size_t(H) + size_t(h)) * size_t(hd);
        store_row(buf, size_t(at.offset(b, h, first + r)), k + src, v + src, hd);
      }
}

size_t KvCache::copy_from(int layer, const KvView& src, int64_t from, int64_t to) {
  Buffer& buf = buffers_[size_t(layer)];
  const LayerSpec& s = config_->layers[size_t(layer)];
  from = std::max(from, to - buf.slots);  // older positions would be overwritten anyway
  size_t bytes = 0;
  const KvView at = view(layer);
  std::vector<float> krow(size_t(s.head_dim)), vrow(size_t(s.head_dim));
  for (int b = 0; b < batch_; ++b)
    for (int h = 0; h < s.num_kv_heads; ++h)
      for (int64_t p = from; p < to; ++p) {
        src.key_f32(b, h, p, krow.data());
        src.value_f32(b, h, p, vrow.data());
        store_row(buf, size_t(at.offset(b, h, p)), krow.data(), vrow.data(), s.head_dim);
        bytes += size_t(s.head_dim) * 2 * dtype_size(dtype_);
      }
  return bytes;
}

void KvCache::store_row(Buffer& buf, size_t dst, const float* k, const float* v, int hd) {
  if (dtype_ != DType::F32) {
    auto to16 = dtype_ == DType::BF16 ? f32_to_bf16 : f32_to_f16;
    for (int d = 0; d < hd; ++d) {
      buf.k16[dst + size_t(d)] = to16(k[d]);
      buf.v16[dst + size_t(d)] = to16(v[d]);
    }
  } else {
    std::memcpy(buf.k.data() + dst, k, size_t(hd) * 4);
    std::memcpy(buf.v.data() + dst, v, size_t(hd) * 4);
  }
}

int64_t KvCache::oldest_held(int layer, int64_t length) const {
  const Buffer& buf = buffers_[size_t(config_->layers[size_t(layer)].kv_source)];
  return buf.ring ? std::max<int64_t>(0, length - buf.slots) : 0;
}

// The buffers were sized by the same rule plan() computes.
KvMemory KvCache::memory() const { return plan(*config_, batch_, capacity_, max_chunk_, dtype_); }

}  // namespace splitdec
