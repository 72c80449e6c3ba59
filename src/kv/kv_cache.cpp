#include "kv/kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "kv/kv_rows.h"

namespace splitdec {

int64_t sliding_slots(int window, int64_t capacity, int max_chunk) {
  return std::min(capacity, int64_t(window) + max_chunk);
}

namespace {
// Sizes from flags and files can be anything: saturate instead of wrapping,
// so a caller comparing with the machine's memory sees "too large".
size_t saturating_product(std::initializer_list<size_t> factors) {
  size_t p = 1;
  for (size_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return SIZE_MAX;
  return p;
}
size_t saturating_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
// Where one sequence's [kv_heads, slots, head_dim] block starts.
size_t seq_base(int64_t slots, const LayerSpec& s, int seq) {
  return size_t(seq) * size_t(s.num_kv_heads) * size_t(slots) * size_t(s.head_dim);
}
}  // namespace

KvMemory KvCache::plan(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype) {
  KvMemory m;
  for (int l = 0; l < config.num_layers; ++l) {
    const LayerSpec& s = config.layers[size_t(l)];
    if (s.kv_source != l) {
      ++m.shared_layers;
      continue;
    }
    const int64_t slots = s.window > 0 ? sliding_slots(s.window, capacity, max_chunk) : capacity;
    const size_t bytes = saturating_product({2, size_t(sequences), size_t(s.num_kv_heads), size_t(slots), kv_row_bytes(dtype, s.head_dim)});
    if (s.type == LayerType::Sliding) ++m.sliding_layers, m.sliding_bytes = saturating_add(m.sliding_bytes, bytes), m.sliding_slots = slots;
    else ++m.full_layers, m.full_bytes = saturating_add(m.full_bytes, bytes), m.full_slots = slots;
  }
  return m;
}

KvCache::KvCache(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype)
    : config_(&config), sequences_(sequences), capacity_(capacity), max_chunk_(max_chunk), dtype_(dtype),
      buffers_(size_t(config.num_layers)), end_(size_t(sequences), 0), oldest_(size_t(sequences), 0) {
  for (int l = 0; l < config.num_layers; ++l) {
    if (!owns(l)) continue;
    const LayerSpec& s = config.layers[size_t(l)];
    Buffer& buf = buffers_[size_t(l)];
    allocate(buf, s, s.window > 0 ? sliding_slots(s.window, capacity, max_chunk) : capacity);
    buf.ring = buf.slots < capacity;
    if (buf.ring) ring_slots_ = ring_slots_ == 0 ? buf.slots : std::min(ring_slots_, buf.slots);
  }
}

void KvCache::allocate(Buffer& buf, const LayerSpec& s, int64_t slots) {
  buf.slots = slots;
  const size_t n = size_t(sequences_) * size_t(s.num_kv_heads) * size_t(slots) * size_t(s.head_dim);
  if (dtype_ == DType::I8) {
    buf.k8 = ZeroedArray<int8_t>(n);
    buf.v8 = ZeroedArray<int8_t>(n);
    buf.ks = ZeroedArray<float>(n / size_t(s.head_dim));
    buf.vs = ZeroedArray<float>(n / size_t(s.head_dim));
  } else if (dtype_ != DType::F32) {
    buf.k16 = ZeroedArray<uint16_t>(n);
    buf.v16 = ZeroedArray<uint16_t>(n);
  } else {
    buf.k = ZeroedArray<float>(n);
    buf.v = ZeroedArray<float>(n);
  }
}

KvMemory KvCache::memory_for_chunk(KvLayout, int rows) const {
  return plan(*config_, sequences_, capacity_, std::max(max_chunk_, rows), dtype_);
}

// Larger rings take over exactly what the old ones held: for each sequence
// the positions [oldest, end), each moved to its slot in the new ring. A
// grown buffer stays a ring (even at `capacity` slots, where the slot of a
// position is the position), so the retention rules of check_rewind keep
// refusing positions the small ring had already dropped.
void KvCache::fit_chunk(KvLayout, int rows) {
  if (rows <= max_chunk_) return;
  if (ring_slots_ > 0)
    for (int seq = 0; seq < sequences_; ++seq)
      oldest_[size_t(seq)] = std::max(oldest_[size_t(seq)], end_[size_t(seq)] - ring_slots_);
  int64_t smallest = 0;
  for (int l = 0; l < config_->num_layers; ++l) {
    const LayerSpec& s = config_->layers[size_t(l)];
    Buffer& old = buffers_[size_t(l)];
    if (!owns(l) || !old.ring) continue;
    Buffer grown;
    allocate(grown, s, sliding_slots(s.window, capacity_, rows));
    grown.ring = true;
    const size_t hd = size_t(s.head_dim), row = kv_row_bytes(dtype_, s.head_dim);
    traffic_.allocated += int64_t(2 * size_t(sequences_) * size_t(s.num_kv_heads) * size_t(grown.slots) * row);
    const KvView from{nullptr, nullptr, 1, s.num_kv_heads, s.head_dim, old.slots, true};
    const KvView to{nullptr, nullptr, 1, s.num_kv_heads, s.head_dim, grown.slots, true};
    for (int seq = 0; seq < sequences_; ++seq)
      for (int h = 0; h < s.num_kv_heads; ++h)
        for (int64_t p = oldest_[size_t(seq)]; p < end_[size_t(seq)]; ++p) {
          const size_t src = seq_base(old.slots, s, seq) + size_t(from.offset(0, h, p));
          const size_t dst = seq_base(grown.slots, s, seq) + size_t(to.offset(0, h, p));
          copy_row(old, src, grown, dst, hd);
          traffic_.copied += int64_t(2 * row);
        }
    old = std::move(grown);
    smallest = smallest == 0 ? old.slots : std::min(smallest, old.slots);
  }
  ring_slots_ = smallest;
  max_chunk_ = rows;
}

KvView KvCache::view(int layer, int seq, KvLayout) const {
  const int src = config_->layers[size_t(layer)].kv_source;
  const LayerSpec& s = config_->layers[size_t(src)];
  const Buffer& buf = buffers_[size_t(src)];
  const size_t base = seq_base(buf.slots, s, seq);
  if (dtype_ == DType::I8) {
    KvView v{nullptr, nullptr, 1, s.num_kv_heads, s.head_dim, buf.slots, buf.ring};
    v.k8 = buf.k8.data() + base, v.v8 = buf.v8.data() + base;
    v.k_scale = buf.ks.data() + base / size_t(s.head_dim), v.v_scale = buf.vs.data() + base / size_t(s.head_dim);
    return v;
  }
  if (dtype_ != DType::F32)
    return {nullptr, nullptr, 1, s.num_kv_heads, s.head_dim, buf.slots, buf.ring, buf.k16.data() + base,
            buf.v16.data() + base, dtype_ == DType::F16};
  return {buf.k.data() + base, buf.v.data() + base, 1, s.num_kv_heads, s.head_dim, buf.slots, buf.ring};
}

// The rings of `seq` hold one interval [oldest, end). Writing [first, end)
// with first <= the old end joins it (a rewound slot may be refilled from
// below), and a ring of S slots keeps only the last S positions.
void KvCache::note_written(int seq, int64_t first, int64_t end) {
  int64_t& oldest = oldest_[size_t(seq)];
  if (ring_slots_ > 0) oldest = std::max(std::min(oldest, first), end - ring_slots_);
  end_[size_t(seq)] = end;
}

void KvCache::write(int layer, int seq, KvLayout, int64_t first, int n, const float* k, const float* v) {
  const LayerSpec& s = config_->layers[size_t(layer)];
  Buffer& buf = buffers_[size_t(layer)];
  const KvView at = view(layer, seq);  // its offset() places a position in the ring
  const size_t base = seq_base(buf.slots, s, seq);
  const int H = s.num_kv_heads, hd = s.head_dim;
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < H; ++h) {
      const size_t src = (size_t(r) * size_t(H) + size_t(h)) * size_t(hd);
      store_row(buf, base + size_t(at.offset(0, h, first + r)), k + src, v + src, hd);
    }
  note_written(seq, first, first + n);
}

size_t KvCache::copy_from(int layer, int seq, const KvView& src, int64_t from, int64_t to) {
  Buffer& buf = buffers_[size_t(layer)];
  const LayerSpec& s = config_->layers[size_t(layer)];
  from = std::max(from, to - buf.slots);  // older positions would be overwritten anyway
  size_t bytes = 0;
  const KvView at = view(layer, seq);
  const size_t base = seq_base(buf.slots, s, seq);
  std::vector<float> krow(size_t(s.head_dim)), vrow(size_t(s.head_dim));
  for (int h = 0; h < s.num_kv_heads; ++h)
    for (int64_t p = from; p < to; ++p) {
      src.key_f32(0, h, p, krow.data());
      src.value_f32(0, h, p, vrow.data());
      store_row(buf, base + size_t(at.offset(0, h, p)), krow.data(), vrow.data(), s.head_dim);
      bytes += 2 * kv_row_bytes(dtype_, s.head_dim);
    }
  note_written(seq, from, to);
  return bytes;
}

// One position's K and V rows as stored (and its scales, for q8), element offsets.
void KvCache::copy_row(const Buffer& from, size_t src, Buffer& to, size_t dst, size_t hd) const {
  if (dtype_ == DType::I8) {
    std::copy_n(from.k8.data() + src, hd, to.k8.data() + dst);
    std::copy_n(from.v8.data() + src, hd, to.v8.data() + dst);
    to.ks[dst / hd] = from.ks[src / hd], to.vs[dst / hd] = from.vs[src / hd];
  } else if (dtype_ != DType::F32) {
    std::copy_n(from.k16.data() + src, hd, to.k16.data() + dst);
    std::copy_n(from.v16.data() + src, hd, to.v16.data() + dst);
  } else {
    std::copy_n(from.k.data() + src, hd, to.k.data() + dst);
    std::copy_n(from.v.data() + src, hd, to.v.data() + dst);
  }
}

void KvCache::store_row(Buffer& buf, size_t dst, const float* k, const float* v, int hd) {
  if (dtype_ == DType::I8) {
    buf.ks[dst / size_t(hd)] = quantize_kv_row(k, hd, buf.k8.data() + dst);
    buf.vs[dst / size_t(hd)] = quantize_kv_row(v, hd, buf.v8.data() + dst);
  } else if (dtype_ != DType::F32) {
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

// A sliding layer needs the window's keys before the new end: a ring that
// already overwrote them cannot give them back.
void KvCache::check_rewind(int seq, int64_t length, int64_t first_real) const {
  if (length == 0 || ring_slots_ == 0) return;
  for (int l = 0; l < config_->num_layers; ++l) {
    const LayerSpec& s = config_->layers[size_t(l)];
    if (s.window == 0 || !owns(l) || !buffers_[size_t(l)].ring) continue;
    const int64_t needed = std::max(first_real, length - s.window + 1);
    const int64_t held = std::max(oldest_[size_t(seq)], end_[size_t(seq)] - buffers_[size_t(l)].slots);
    if (needed < held)
      throw CapacityError("cannot rewind to position " + std::to_string(length) + ": sliding layer " + std::to_string(l) +
                          " keeps a ring of its last positions and has dropped position " + std::to_string(needed) +
                          " (oldest held: " + std::to_string(held) + ")");
  }
}

void KvCache::rewind(int seq, int64_t length) {
  end_[size_t(seq)] = std::min(end_[size_t(seq)], length);
  oldest_[size_t(seq)] = std::min(oldest_[size_t(seq)], end_[size_t(seq)]);  // nothing below the end may be held
}

int64_t KvCache::first_needed(int64_t length, int64_t first_real) const {
  int64_t needed = length;
  for (int l = 0; l < config_->num_layers; ++l) {
    const LayerSpec& s = config_->layers[size_t(l)];
    if (s.window > 0 && owns(l) && buffers_[size_t(l)].ring) needed = std::min(needed, std::max(first_real, length - s.window + 1));
  }
  return needed;
}

void KvCache::clear(int seq) { end_[size_t(seq)] = oldest_[size_t(seq)] = 0; }

// Every sequence's block of a layer has the same geometry, so a position sits
// at the same offset in both: the rows held (a ring's [oldest, end), a full
// layer's [0, end)) are copied as they are stored (no rounding again).
void KvCache::copy_sequence(int from, int to) {
  if (from == to) return;
  const int64_t first = oldest_[size_t(from)], end = end_[size_t(from)];
  for (int l = 0; l < config_->num_layers; ++l) {
    if (!owns(l)) continue;
    const LayerSpec& s = config_->layers[size_t(l)];
    Buffer& buf = buffers_[size_t(l)];
    const KvView at = view(l, from);
    const size_t hd = size_t(s.head_dim), src_base = seq_base(buf.slots, s, from), dst_base = seq_base(buf.slots, s, to);
    const int64_t held = buf.ring ? std::max(first, end - buf.slots) : 0;  // a full layer holds every position
    for (int h = 0; h < s.num_kv_heads; ++h)
      for (int64_t p = held; p < end; ++p) {
        const size_t off = size_t(at.offset(0, h, p)), src = src_base + off, dst = dst_base + off;
        copy_row(buf, src, buf, dst, hd);
        traffic_.copied += int64_t(2 * kv_row_bytes(dtype_, s.head_dim));
      }
  }
  oldest_[size_t(to)] = first;
  end_[size_t(to)] = end;
}

// The buffers were sized by the same rule plan() computes.
KvMemory KvCache::memory() const { return plan(*config_, sequences_, capacity_, max_chunk_, dtype_); }

}  // namespace splitdec
