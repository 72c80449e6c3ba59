// The three attention paths. Each reads keys and values through a KvView,
// so the same kernel runs over the shared in-place buffer (a ring on sliding
// layers) or over a contiguous past/present pair.
//
//  - masked_prefill_attention: per-row key intervals (O(S) to describe, from
//    the mask contract); never an S x T bias.
//  - gqa_attention: causal + the layer's window and each sequence's start;
//    no mask input. Reads each KV head once for all query heads of its group.
//  - dense_bias_attention: a float bias [B, S, T] added to every score, as a
//    generic exported Attention op does.
//
// All three give zero output for a row with no visible key. Each runs on
// its CpuContext (the backend call's; by default the process's).
#pragma once

#include <cstdint>

#include "kernels/cpu_context.h"
#include "mask/mask_contract.h"

namespace splitdec {

// The attention kernels a plan routes a chunk or step to (pipeline/plan.h
// says which; a backend runs it): masked_prefill_attention, gqa_attention,
// dense_bias_attention, and Unified (the masked kernel's intervals on every
// call, as one mask-aware GQA kernel would take them).
enum class AttentionPath { Masked, Gqa, DenseBias, Unified };

// K and V of one layer for a batch: [batch, kv_heads, slots, head_dim],
// f32 (k, v) or 16-bit (k16, v16; k and v are then null): bf16, or f16 when
// `f16` is set. Position p lives in slot p % slots on a ring, slot p otherwise.
struct KvView {
  const float* k = nullptr;
  const float* v = nullptr;
  int batch = 0, kv_heads = 0, head_dim = 0;
  int64_t slots = 0;
  bool ring = false;
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  bool f16 = false;
  // q8 storage (--kv-dtype q8): int8 rows, one f32 scale per row (the
  // scale of the row at offset(b, h, pos) is at offset / head_dim).
  const int8_t* k8 = nullptr;
  const int8_t* v8 = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;

  bool is_16bit() const { return k16 != nullptr; }
  bool is_q8() const { return k8 != nullptr; }
  bool is_f32() const { return k != nullptr; }
  int64_t slot(int64_t pos) const { return ring ? pos % slots : pos; }
  int64_t offset(int b, int h, int64_t pos) const { return ((int64_t(b) * kv_heads + h) * slots + slot(pos)) * head_dim; }
  const float* key(int b, int h, int64_t pos) const { return k + offset(b, h, pos); }
  const float* value(int b, int h, int64_t pos) const { return v + offset(b, h, pos); }
  // One row as f32, whatever the storage.
  void key_f32(int b, int h, int64_t pos, float* out) const { row_f32(false, b, h, pos, out); }
  void value_f32(int b, int h, int64_t pos, float* out) const { row_f32(true, b, h, pos, out); }
  void row_f32(bool values, int b, int h, int64_t pos, float* out) const;
};

// Queries [batch, rows, heads, head_dim] at positions first_position + r.
struct QueryBlock {
  const float* q = nullptr;
  int batch = 0, rows = 0, heads = 0, head_dim = 0;
  int64_t first_position = 0;
  float scale = 1.f;
  float softcap = 0.f;  // > 0: scores become softcap * tanh(score / softcap) (after scaling, before masking)
};

// intervals: [batch * rows] visible keys per query row, padding already
// applied (see mask/chunk_mask.h). out: [batch, rows, heads, head_dim].
// Two rows or more run as flash-attention tiles (flash_attention.h); a
// single row (a decode step of the unified plan) runs rowwise.
void masked_prefill_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out,
                              const CpuContext& cpu = CpuContext::process_default());

// window: the layer's sliding window (0: none). seq_start: [batch] first
// non-padding position of each sequence (left padding). Two rows or more
// (prompt chunks) run as flash-attention tiles over the rows' intervals; one
// row (decode) runs the blocked per-key kernel, split across threads on long
// contexts.
void gqa_attention(const QueryBlock& q, const KvView& kv, int window, const int64_t* seq_start, float* out,
                   const CpuContext& cpu = CpuContext::process_default());

// The per-key kernel the tiles replaced for prefill: each row's interval
// walked key by key (dot products, blocked online softmax). Kept as the
// second reference of the tiled kernel and as the baseline `splitdec bench`
// measures it against.
void rowwise_prefill_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out,
                               const CpuContext& cpu = CpuContext::process_default());

// bias: [batch, rows, total] with total = first_position + rows; -inf hides a key.
void dense_bias_attention(const QueryBlock& q, const KvView& kv, const float* bias, float* out,
                          const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
