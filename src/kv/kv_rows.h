// How one K or V row (head_dim values of one head at one position) is kept
// in each KV storage type, in one place for every store:
//   F32        as computed;
//   BF16, F16  each value rounded to nearest even;
//   I8 (q8)    int8 values with one f32 scale for the row: s = max |x| /
//              127, q = round(x / s), x' = s * q (a NaN makes s NaN, so it
//              reaches the output as in f32; an all-zero row has s = 0).
// The stores that keep f32 (the `present` of the single and split-copy
// plans) keep each row as the shared buffer would hand it back, so every
// plan attends over the same values and they agree on the tokens.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "splitdec/options.h"

namespace splitdec {

// The element type a KvStorage keeps rows in (q8 is DType::I8).
DType kv_storage_dtype(KvStorage storage);

// Bytes of one stored row (q8: the int8 values and the f32 scale).
size_t kv_row_bytes(DType storage, int head_dim);

// A row to q8: values q[hd], returns the scale.
float quantize_kv_row(const float* x, int hd, int8_t* q);

// x rounded to what `storage` gives back, into out (may be x).
void round_trip_kv_row(DType storage, const float* x, int hd, float* out);

}  // namespace splitdec
