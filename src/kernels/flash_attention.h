// Prefill attention as tiles of matrix products (flash attention).
//
// One work item is (sequence, KV head, query tile). The query heads of the
// KV head's group are stacked as extra query rows, so one K/V tile load
// serves the whole group. For each key tile: S = K Q^T (one small GEMM,
// key-major so the softmax runs across query rows in vector lanes), an
// online-softmax step per query row, then O = diag(c) O + P V (a second
// GEMM). Key tiles are classified from the row intervals: empty (skipped),
// full (no mask work) or partial (each row masked by its interval).
//
// Each output row is computed by one work item, over key tiles aligned to
// absolute positions, in a fixed order: results do not depend on the thread
// count nor on the query tile height.
#pragma once

#include "kernels/attention.h"

namespace splitdec {

struct FlashTiles {
  int stacked_rows = 0;  // query rows x group heads per tile (0: the default for the shape)
  int keys = 0;          // keys per tile (0: the default)
};

// The tile sizes used for head_dim `hd` on the current SIMD table.
FlashTiles default_flash_tiles(int head_dim);

// intervals: [batch * rows] visible keys per query row (as for
// masked_prefill_attention). out: [batch, rows, heads, head_dim].
// `cpu`: the threads and SIMD table to run on (tests run each table).
void flash_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out, FlashTiles tiles = {},
                     const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
