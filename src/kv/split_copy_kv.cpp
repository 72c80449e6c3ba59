#include "kv/split_copy_kv.h"

#include <algorithm>

namespace splitdec {

SplitCopyKv::SplitCopyKv(const ModelConfig& config, int sequences, int64_t capacity, int max_chunk, DType dtype)
    : config_(&config), shared_(config, sequences, capacity, max_chunk, dtype), present_(config, sequences, dtype),
      shared_valid_(size_t(sequences), 0), present_valid_(size_t(sequences), 0), present_zero_end_(size_t(sequences), 0) {}

void SplitCopyKv::prepare(int seq, KvLayout layout, int64_t length) {
  int64_t& present_valid = present_valid_[size_t(seq)];
  int64_t& shared_valid = shared_valid_[size_t(seq)];
  // A hand-off into the present zero-fills positions a ring already dropped.
  if (layout == KvLayout::Present && present_valid < length)
    present_zero_end_[size_t(seq)] = std::max(present_zero_end_[size_t(seq)], shared_.oldest_held(seq));
  for (int l = 0; l < config_->num_layers; ++l) {
    if (config_->is_kv_shared(l)) continue;
    if (layout == KvLayout::Present && present_valid < length)
      present_.append_from(l, seq, shared_.view(l, seq), length);  // decoded positions join the prefill's past
    else if (layout == KvLayout::Shared && shared_valid < length)
      traffic_.copied += int64_t(shared_.copy_from(l, seq, present_.view(l, seq), shared_valid, length));  // the hand-off
  }
  if (layout == KvLayout::Present) present_valid = std::max(present_valid, length);
  else shared_valid = std::max(shared_valid, length);
}

void SplitCopyKv::write(int layer, int seq, KvLayout layout, int64_t first, int n, const float* k, const float* v) {
  if (layout == KvLayout::Present) {
    present_.write(layer, seq, layout, first, n, k, v);
    present_valid_[size_t(seq)] = first + n;
  } else {
    shared_.write(layer, seq, layout, first, n, k, v);
    shared_valid_[size_t(seq)] = first + n;
  }
}

KvView SplitCopyKv::view(int layer, int seq, KvLayout layout) const {
  return layout == KvLayout::Present ? present_.view(layer, seq) : shared_.view(layer, seq);
}

// The present holds the window a rewind needs when it reaches `length` and
// none of the needed positions is one a hand-off filled with zeros.
bool SplitCopyKv::present_covers(int seq, int64_t length, int64_t first_real) const {
  return present_valid_[size_t(seq)] >= length && shared_.first_needed(length, first_real) >= present_zero_end_[size_t(seq)];
}

void SplitCopyKv::check_rewind(int seq, int64_t length, int64_t first_real) const {
  if (!present_covers(seq, length, first_real)) shared_.check_rewind(seq, length, first_real);
}

void SplitCopyKv::rewind(int seq, int64_t length) {
  // Where the shared rings no longer hold the window, the next decode step
  // must copy it back from the present: mark those positions stale.
  const int64_t needed = shared_.first_needed(length, 0);
  const bool shared_lost = length > 0 && needed < shared_.oldest_held(seq);
  present_.rewind(seq, length);
  shared_.rewind(seq, length);
  present_valid_[size_t(seq)] = std::min(present_valid_[size_t(seq)], length);
  shared_valid_[size_t(seq)] = std::min(shared_valid_[size_t(seq)], shared_lost ? needed : length);
  present_zero_end_[size_t(seq)] = std::min(present_zero_end_[size_t(seq)], length);
}

void SplitCopyKv::clear(int seq) {
  present_.clear(seq);
  shared_.clear(seq);
  present_valid_[size_t(seq)] = shared_valid_[size_t(seq)] = present_zero_end_[size_t(seq)] = 0;
}

void SplitCopyKv::copy_sequence(int from, int to) {
  if (from == to) return;
  present_.copy_sequence(from, to);  // may throw (it allocates), leaving `to` as it was
  shared_.copy_sequence(from, to);   // allocates nothing
  for (auto* v : {&present_valid_, &shared_valid_, &present_zero_end_}) (*v)[size_t(to)] = (*v)[size_t(from)];
}

KvTraffic SplitCopyKv::take_traffic() {
  KvTraffic t = KvStore::take_traffic();
  for (const KvTraffic& part : {shared_.take_traffic(), present_.take_traffic()})
    t.allocated += part.allocated, t.copied += part.copied;
  return t;
}

}  // namespace splitdec
