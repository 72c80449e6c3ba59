#include "kv/concat_kv.h"

#include <algorithm>
#include <cstring>

namespace splitdec {

void ConcatKv::Block::reserve(size_t n) {
  if (n <= capacity) return;
  capacity = std::max(n, capacity + capacity / 4);  // some headroom: presents grow by a few rows each step
  data.reset(new float[capacity]);
}

ConcatKv::ConcatKv(const ModelConfig& config, int batch)
    : config_(&config), batch_(batch), layers_(size_t(config.num_layers)) {}

// Makes the present with room for n more positions and copies the past into
// it; the new rows are filled by the caller.
size_t ConcatKv::grow(int layer, int n) {
  const LayerSpec& s = config_->layers[size_t(layer)];
  Layer& L = layers_[size_t(layer)];
  const size_t row = size_t(s.head_dim);
  const int64_t T = L.length + n;
  const size_t size = size_t(batch_) * size_t(s.num_kv_heads) * size_t(T) * row;
  L.spare_k.reserve(size);
  L.spare_v.reserve(size);
  for (int b = 0; b < batch_ && L.length > 0; ++b)
    for (int h = 0; h < s.num_kv_heads; ++h) {
      const size_t src = (size_t(b) * size_t(s.num_kv_heads) + size_t(h)) * size_t(L.length) * row;
      const size_t dst = (size_t(b) * size_t(s.num_kv_heads) + size_t(h)) * size_t(T) * row;
      std::memcpy(L.spare_k.data.get() + dst, L.k.data.get() + src, size_t(L.length) * row * 4);
      std::memcpy(L.spare_v.data.get() + dst, L.v.data.get() + src, size_t(L.length) * row * 4);
    }
  std::swap(L.k, L.spare_k);  // the old past becomes the spare for the next call
  std::swap(L.v, L.spare_v);
  L.length = T;
  return 2 * size * sizeof(float);
}

size_t ConcatKv::append(int layer, int n, const float* k, const float* v) {
  const size_t bytes = grow(layer, n);
  const LayerSpec& s = config_->layers[size_t(layer)];
  Layer& L = layers_[size_t(layer)];
  const int64_t first = L.length - n;
  const KvView at = view(layer);
  const size_t hd = size_t(s.head_dim);
  for (int b = 0; b < batch_; ++b)
    for (int r = 0; r < n; ++r)
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const size_t src = ((size_t(b) * size_t(n) + size_t(r)) * size_t(s.num_kv_heads) + size_t(h)) * hd;
        const size_t dst = size_t(at.offset(b, h, first + r));
        std::memcpy(L.k.data.get() + dst, k + src, hd * 4);
        std::memcpy(L.v.data.get() + dst, v + src, hd * 4);
      }
  return bytes;
}

size_t ConcatKv::append_from(int layer, const KvView& src, int64_t from, int64_t to) {
  const size_t bytes = grow(layer, int(to - from));
  const LayerSpec& s = config_->layers[size_t(layer)];
  Layer& L = layers_[size_t(layer)];
  const KvView at = view(layer);
  const size_t hd = size_t(s.head_dim);
  // Positions a ring has already dropped are zero: no window reaches them.
  const int64_t held = src.ring ? std::max<int64_t>(from, to - src.slots) : from;
  for (int b = 0; b < batch_; ++b)
    for (int h = 0; h < s.num_kv_heads; ++h) {
      for (int64_t p = from; p < held; ++p) {
        const size_t dst = size_t(at.offset(b, h, p));
        std::fill_n(L.k.data.get() + dst, hd, 0.f);
        std::fill_n(L.v.data.get() + dst, hd, 0.f);
      }
      for (int64_t p = held; p < to; ++p) {
        const size_t dst = size_t(at.offset(b, h, p));
        src.key_f32(b, h, p, L.k.data.get() + dst);
        src.value_f32(b, h, p, L.v.data.get() + dst);
      }
    }
  return bytes;
}

KvView ConcatKv::view(int layer) const {
  const int src = config_->layers[size_t(layer)].kv_source;
  const LayerSpec& s = config_->layers[size_t(src)];
  const Layer& L = layers_[size_t(src)];
  return {L.k.data.get(), L.v.data.get(), batch_, s.num_kv_heads, s.head_dim, L.length, false};
}

void ConcatKv::truncate(int64_t length) {
  for (int l = 0; l < config_->num_layers; ++l) {
    Layer& L = layers_[size_t(l)];
    if (L.length <= length) continue;
    // Rows keep their [batch, head] blocks: move each block down in place.
    const LayerSpec& s = config_->layers[size_t(l)];
    const size_t hd = size_t(s.head_dim);
    for (int b = 0; b < batch_ && length > 0; ++b)
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const size_t bh = size_t(b) * size_t(s.num_kv_heads) + size_t(h);
        std::memmove(L.k.data.get() + bh * size_t(length) * hd, L.k.data.get() + bh * size_t(L.length) * hd, size_t(length) * hd * 4);
        std::memmove(L.v.data.get() + bh * size_t(length) * hd, L.v.data.get() + bh * size_t(L.length) * hd, size_t(length) * hd * 4);
      }
    L.length = length;
  }
}

}  // namespace splitdec
