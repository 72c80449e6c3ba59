#include "kv/concat_kv.h"

#include <algorithm>
#include <cstring>

#include "kv/kv_rows.h"

namespace splitdec {

void ConcatKv::Block::reserve(size_t n) {
  if (n <= capacity) return;
  capacity = std::max(n, capacity + capacity / 4);  // some headroom: presents grow by a few rows each step
  data.reset(new float[capacity]);
}

ConcatKv::ConcatKv(const ModelConfig& config, int sequences, DType storage)
    : config_(&config), storage_(storage), presents_(size_t(sequences) * size_t(config.num_layers)) {}

// Makes the present with room for n more positions and copies the past into
// it; the new rows are filled by the caller.
size_t ConcatKv::grow(int layer, int seq, int n) {
  const LayerSpec& s = config_->layers[size_t(layer)];
  Present& P = at(layer, seq);
  const size_t row = size_t(s.head_dim);
  const int64_t T = P.length + n;
  const size_t size = size_t(s.num_kv_heads) * size_t(T) * row;
  P.spare_k.reserve(size);
  P.spare_v.reserve(size);
  for (int h = 0; h < s.num_kv_heads && P.length > 0; ++h) {
    const size_t src = size_t(h) * size_t(P.length) * row;
    const size_t dst = size_t(h) * size_t(T) * row;
    std::memcpy(P.spare_k.data.get() + dst, P.k.data.get() + src, size_t(P.length) * row * 4);
    std::memcpy(P.spare_v.data.get() + dst, P.v.data.get() + src, size_t(P.length) * row * 4);
  }
  std::swap(P.k, P.spare_k);  // the old past becomes the spare for the next call
  std::swap(P.v, P.spare_v);
  P.length = T;
  return 2 * size * sizeof(float);
}

void ConcatKv::write(int layer, int seq, KvLayout, int64_t first, int n, const float* k, const float* v) {
  const LayerSpec& s = config_->layers[size_t(layer)];
  const size_t bytes = grow(layer, seq, n);
  // The whole present is new memory, and all of it is written by copies.
  traffic_.allocated += int64_t(bytes);
  traffic_.copied += int64_t(bytes);
  Present& P = at(layer, seq);
  const KvView to = view(layer, seq);
  const size_t hd = size_t(s.head_dim);
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < s.num_kv_heads; ++h) {
      const size_t src = (size_t(r) * size_t(s.num_kv_heads) + size_t(h)) * hd;
      const size_t dst = size_t(to.offset(0, h, first + r));
      round_trip_kv_row(storage_, k + src, int(hd), P.k.data.get() + dst);
      round_trip_kv_row(storage_, v + src, int(hd), P.v.data.get() + dst);
    }
}

void ConcatKv::append_from(int layer, int seq, const KvView& src, int64_t to) {
  const int64_t from = at(layer, seq).length;
  if (to <= from) return;
  traffic_.copied += int64_t(grow(layer, seq, int(to - from)));
  const LayerSpec& s = config_->layers[size_t(layer)];
  Present& P = at(layer, seq);
  const KvView dst_view = view(layer, seq);
  const size_t hd = size_t(s.head_dim);
  // Positions a ring has already dropped are zero: no window reaches them.
  const int64_t held = src.ring ? std::max<int64_t>(from, to - src.slots) : from;
  for (int h = 0; h < s.num_kv_heads; ++h) {
    for (int64_t p = from; p < held; ++p) {
      const size_t dst = size_t(dst_view.offset(0, h, p));
      std::fill_n(P.k.data.get() + dst, hd, 0.f);
      std::fill_n(P.v.data.get() + dst, hd, 0.f);
    }
    for (int64_t p = held; p < to; ++p) {
      const size_t dst = size_t(dst_view.offset(0, h, p));
      src.key_f32(0, h, p, P.k.data.get() + dst);
      src.value_f32(0, h, p, P.v.data.get() + dst);
    }
  }
}

// All or nothing: the presents that must grow are allocated first, so a
// failed allocation leaves slot `to` as it was.
void ConcatKv::copy_sequence(int from, int to) {
  if (from == to) return;
  const int L = config_->num_layers;
  auto values = [&](int l) {
    const LayerSpec& s = config_->layers[size_t(l)];
    return size_t(s.num_kv_heads) * size_t(at(l, from).length) * size_t(s.head_dim);
  };
  std::vector<std::pair<Block, Block>> grown(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l)
    if (values(l) > at(l, to).k.capacity) grown[size_t(l)].first.reserve(values(l)), grown[size_t(l)].second.reserve(values(l));
  for (int l = 0; l < L; ++l) {
    const Present& src = at(l, from);
    Present& dst = at(l, to);
    if (grown[size_t(l)].first.capacity > 0) std::swap(dst.k, grown[size_t(l)].first), std::swap(dst.v, grown[size_t(l)].second);
    const size_t n = values(l);
    if (n > 0) {
      std::memcpy(dst.k.data.get(), src.k.data.get(), n * 4);
      std::memcpy(dst.v.data.get(), src.v.data.get(), n * 4);
    }
    dst.length = src.length;
    traffic_.copied += int64_t(2 * n * 4);
  }
}

KvView ConcatKv::view(int layer, int seq, KvLayout) const {
  const int src = config_->layers[size_t(layer)].kv_source;
  const LayerSpec& s = config_->layers[size_t(src)];
  const Present& P = at(src, seq);
  return {P.k.data.get(), P.v.data.get(), 1, s.num_kv_heads, s.head_dim, P.length, false};
}

void ConcatKv::rewind(int seq, int64_t length) {
  for (int l = 0; l < config_->num_layers; ++l) {
    Present& P = at(l, seq);
    if (P.length <= length) continue;
    // Rows keep their per-head blocks: move each block down in place.
    const LayerSpec& s = config_->layers[size_t(l)];
    const size_t hd = size_t(s.head_dim);
    for (int h = 0; h < s.num_kv_heads && length > 0; ++h) {
      std::memmove(P.k.data.get() + size_t(h) * size_t(length) * hd, P.k.data.get() + size_t(h) * size_t(P.length) * hd,
                   size_t(length) * hd * 4);
      std::memmove(P.v.data.get() + size_t(h) * size_t(length) * hd, P.v.data.get() + size_t(h) * size_t(P.length) * hd,
                   size_t(length) * hd * 4);
    }
    P.length = length;
  }
}

}  // namespace splitdec
