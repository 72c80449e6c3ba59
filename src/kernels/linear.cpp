#include "kernels/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/env_switch.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/gemm_bf16.h"
#include "kernels/matvec_grain.h"
#include "kernels/k_quant_rows.h"
#include "kernels/row_kernels.h"
#include "kernels/simd/row_groups.h"

extern "C" void openblas_set_num_threads(int);

namespace splitdec {

namespace {
template <class T>
const T* as(const uint8_t* p) {
  return reinterpret_cast<const T*>(p);
}
// A block format's kernels: every entry of the table's, rows as stored.
template <auto Dot, auto Dot4, auto Expand, auto DotQ8, auto Dot4Q8>
RowKernels block_row_kernels() {
  using simd::KernelTable;
  return {[](const KernelTable& t, const float* x, const uint8_t* w, int n) { return (t.*Dot)(x, w, n); },
          [](const KernelTable& t, const float* const x[4], const uint8_t* w, int n, float out[4]) { (t.*Dot4)(x, w, n, out); },
          [](const KernelTable& t, const uint8_t* w, int n, float* dst) { (t.*Expand)(w, n, dst); }, false,
          [](const KernelTable& t, const float* s, const int8_t* q, const uint8_t* w, int n) { return (t.*DotQ8)(s, q, w, n); },
          [](const KernelTable& t, const float* const s[4], const int8_t* const q[4], const uint8_t* w, int n, float out[4]) {
            (t.*Dot4Q8)(s, q, w, n, out);
          },
          nullptr, nullptr};
}
// A K-quant's kernels: plain C whatever the table, four rows one by one.
template <auto Dot, auto Expand, auto DotQ8>
RowKernels k_quant_row_kernels() {
  using simd::KernelTable;
  return {[](const KernelTable&, const float* x, const uint8_t* w, int n) { return Dot(x, w, n); },
          [](const KernelTable&, const float* const x[4], const uint8_t* w, int n, float out[4]) {
            for (int r = 0; r < 4; ++r) out[r] = Dot(x[r], w, n);
          },
          [](const KernelTable&, const uint8_t* w, int n, float* dst) { Expand(w, n, dst); }, false,
          [](const KernelTable&, const float* s, const int8_t* q, const uint8_t* w, int n) { return DotQ8(s, q, w, n); },
          [](const KernelTable&, const float* const s[4], const int8_t* const q[4], const uint8_t* w, int n, float out[4]) {
            for (int r = 0; r < 4; ++r) out[r] = DotQ8(s[r], q[r], w, n);
          },
          nullptr, nullptr};
}
}  // namespace

const RowKernels& row_kernels(WeightFormat format) {
  using simd::KernelTable;
  static const RowKernels f32{
      [](const KernelTable& t, const float* x, const uint8_t* w, int n) { return t.dot_f32(x, as<float>(w), n); },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w, int n, float out[4]) { t.dot4_f32(x, as<float>(w), n, out); },
      [](const KernelTable&, const uint8_t* w, int n, float* dst) { std::memcpy(dst, w, size_t(n) * 4); }, true, nullptr, nullptr,
      [](const KernelTable& t, const float* x, const uint8_t* w0, const uint8_t* w1, int n, float out[2]) {
        t.dot2_f32(x, as<float>(w0), as<float>(w1), n, out);
      },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w0, const uint8_t* w1, int n, float out[8]) {
        t.dot4x2_f32(x, as<float>(w0), as<float>(w1), n, out);
      }};
  static const RowKernels bf16{
      [](const KernelTable& t, const float* x, const uint8_t* w, int n) { return t.dot_bf16(x, as<uint16_t>(w), n); },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w, int n, float out[4]) { t.dot4_bf16(x, as<uint16_t>(w), n, out); },
      [](const KernelTable& t, const uint8_t* w, int n, float* dst) { t.expand_bf16(as<uint16_t>(w), n, dst); }, false, nullptr, nullptr,
      [](const KernelTable& t, const float* x, const uint8_t* w0, const uint8_t* w1, int n, float out[2]) {
        t.dot2_bf16(x, as<uint16_t>(w0), as<uint16_t>(w1), n, out);
      },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w0, const uint8_t* w1, int n, float out[8]) {
        t.dot4x2_bf16(x, as<uint16_t>(w0), as<uint16_t>(w1), n, out);
      }};
  static const RowKernels f16{
      [](const KernelTable& t, const float* x, const uint8_t* w, int n) { return t.dot_f16(x, as<uint16_t>(w), n); },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w, int n, float out[4]) { t.dot4_f16(x, as<uint16_t>(w), n, out); },
      [](const KernelTable& t, const uint8_t* w, int n, float* dst) { t.expand_f16(as<uint16_t>(w), n, dst); }, false, nullptr, nullptr,
      [](const KernelTable& t, const float* x, const uint8_t* w0, const uint8_t* w1, int n, float out[2]) {
        t.dot2_f16(x, as<uint16_t>(w0), as<uint16_t>(w1), n, out);
      },
      [](const KernelTable& t, const float* const x[4], const uint8_t* w0, const uint8_t* w1, int n, float out[8]) {
        t.dot4x2_f16(x, as<uint16_t>(w0), as<uint16_t>(w1), n, out);
      }};
  static const RowKernels q8_0 = block_row_kernels<&KernelTable::dot_q8, &KernelTable::dot4_q8, &KernelTable::expand_q8,
                                                    &KernelTable::dot_q8_q8, &KernelTable::dot4_q8_q8>();
  static const RowKernels q4_0 = block_row_kernels<&KernelTable::dot_q4, &KernelTable::dot4_q4, &KernelTable::expand_q4,
                                                    &KernelTable::dot_q4_q8, &KernelTable::dot4_q4_q8>();
  // The K-quants' rows one at a time are plain C (k_quant_rows.h): their
  // vector kernels are the row groups'.
  static const RowKernels q4_k = k_quant_row_kernels<q4_k_dot, q4_k_expand, q4_k_dot_q8>();
  static const RowKernels q5_k = k_quant_row_kernels<q5_k_dot, q5_k_expand, q5_k_dot_q8>();
  static const RowKernels q6_k = k_quant_row_kernels<q6_k_dot, q6_k_expand, q6_k_dot_q8>();
  switch (format) {
    case WeightFormat::Q8_0: return q8_0;
    case WeightFormat::Q4_0: return q4_0;
    case WeightFormat::Q4_K: return q4_k;
    case WeightFormat::Q5_K: return q5_k;
    case WeightFormat::Q6_K: return q6_k;
    case WeightFormat::F32: return f32;
    case WeightFormat::BF16: return bf16;
    case WeightFormat::F16: return f16;
  }
  return f32;
}

namespace {

// Outputs [o0, o1) for every row, four rows per weight load. Where the
// format has dot2 / dot4x2, row i of the range's first half pairs with row
// i of its second half: two weight streams per thread, where adjacent rows
// read as one (on a Xeon the bf16 single-row matvec went from 81-82% to
// 90-92% of the paired bandwidth probe, gemma3-1b bf16 decode from 11.5 to
// 13.3-14.0 tokens/s; 4 sequences 1.15-1.3x). Each output's bits do not
// depend on its partner.
// From 8 rows the step is bound by the kernel's own loads, not the stream:
// pairs then pay only where the x rows overflow L1, since a pair halves
// their traffic from L2 (8-16 rows of 2048-15360: 1.2-1.3x), and only on a
// table whose dot4x2 runs in one pass (AVX2's two passes ran 8 sequences
// 10-20% slower; 8 rows of 1152 in L1, 1.1x slower paired on AVX-512).
constexpr int64_t kL1Bytes = 48 << 10;
bool pair_rows(const simd::KernelTable& t, const RowKernels& k, int rows, int in) {
  if (!k.dot2 || !k.dot4x2) return false;
  return rows < 8 || (t.dot4x2_single_pass && int64_t(rows) * in * int64_t(sizeof(float)) > kL1Bytes);
}

void matvec_block(const simd::KernelTable& t, const RowKernels& k, const float* x, int rows, const WeightMatrix& w, float* y,
                  int64_t o0, int64_t o1) {
  const int in = w.in;
  const float* xs[4];
  int64_t o = o0;
  if (pair_rows(t, k, rows, in)) {
    const int64_t half = (o1 - o0) / 2;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = o0 + i, b = o0 + half + i;
      int r = 0;
      for (; r + 4 <= rows; r += 4) {
        for (int j = 0; j < 4; ++j) xs[j] = x + int64_t(r + j) * in;
        float out[8];
        k.dot4x2(t, xs, w.row(int(a)), w.row(int(b)), in, out);
        for (int j = 0; j < 4; ++j) y[int64_t(r + j) * w.out + a] = out[j], y[int64_t(r + j) * w.out + b] = out[4 + j];
      }
      for (; r < rows; ++r) {
        float out[2];
        k.dot2(t, x + int64_t(r) * in, w.row(int(a)), w.row(int(b)), in, out);
        y[int64_t(r) * w.out + a] = out[0], y[int64_t(r) * w.out + b] = out[1];
      }
    }
    o = o0 + 2 * half;  // an odd range's last output
  }
  for (; o < o1; ++o) {
    const uint8_t* wr = w.row(int(o));
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
      for (int j = 0; j < 4; ++j) xs[j] = x + int64_t(r + j) * in;
      float out[4];
      k.dot4(t, xs, wr, in, out);
      for (int j = 0; j < 4; ++j) y[int64_t(r + j) * w.out + o] = out[j];
    }
    for (; r < rows; ++r) y[int64_t(r) * w.out + o] = k.dot(t, x + int64_t(r) * in, wr, in);
  }
}

// Prefill: one BLAS sgemm per panel of outputs, panels spread over the pool.
// Panels are wide (up to 256 outputs) so that OpenBLAS packs the input rows
// once per panel (at 64 outputs, sgemm_oncopy took a fifth of an encoder
// layer's time), yet a matrix has at least ~8 of them so that the threads
// share the work. Their edges depend on the matrix only, not on the thread
// count, so neither do the results (OpenBLAS sums a column at a panel's edge
// in another order). 16-bit rows are expanded to f32 one panel at a time.
void gemm_panels(ThreadPool& pool, const float* x, int rows, const WeightMatrix& w, float* y) {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });  // our pool owns the cores
  const int kPanel = std::clamp((w.out + 8 * 16 - 1) / (8 * 16) * 16, 64, 256);
  const RowKernels& k = row_kernels(w.format);
  const int64_t panels = (w.out + kPanel - 1) / kPanel;
  pool.parallel_for(panels, [&](int64_t p0, int64_t p1) {
    std::vector<float> buf;
    for (int64_t p = p0; p < p1; ++p) {
      const int o0 = int(p * kPanel), n = std::min(kPanel, w.out - o0);
      const float* panel = as<float>(w.row(o0));
      if (!k.f32_rows) {
        buf.resize(size_t(n) * size_t(w.in));
        for (int j = 0; j < n; ++j) w.row_f32(o0 + j, buf.data() + size_t(j) * size_t(w.in));  // grouped rows too
        panel = buf.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, w.in, 1.f, x, w.in, panel, w.in, 0.f, y + o0, w.out);
    }
  });
}

// Activation rows quantized for int8 products (int8_activations): values
// [rows][in], scales [rows][in / block], one per weight block: 32 (Q8_0
// form) or 256 for the K-quants (Q8_K form, simd/row_groups.h). Kept per calling thread and
// reused, so a decode step allocates nothing.
// For row groups also what their kernel takes, and only then, per 32-value
// block: -8 (Q4_0) or -128 (Q8_0) x the block's sum of q [rows][in / 32],
// the block sums in pairs for Q4_K's and Q5_K's mins [rows][in / 64], the
// sums of its halves for Q6_K's [rows][in / 32] (empty otherwise).
struct QuantizedRows {
  int block = 32;
  std::vector<float> scale;
  std::vector<int8_t> q;
  int32_t offset = 0;  // the weights' offset for offset_sum (8 or 128)
  std::vector<int32_t> offset_sum;
  std::vector<int32_t> sum_pairs;
  std::vector<int32_t> half_sums;
  const float* scales(int64_t r, int in) const { return scale.data() + r * (in / block); }
};

void quantize_row(const simd::KernelTable& t, const float* x, int in, QuantizedRows& out, int64_t r) {
  const size_t nb = size_t(in / 32);
  int8_t* q = &out.q[size_t(r) * size_t(in)];
  t.quantize_q8_activations(x, in, out.block, &out.scale[size_t(r) * size_t(in / out.block)], q);
  int32_t previous = 0;  // block b - 1's sum, for sum_pairs
  for (size_t b = 0; b < nb && (!out.offset_sum.empty() || !out.sum_pairs.empty() || !out.half_sums.empty()); ++b) {
    int32_t first = 0, second = 0;
    for (int j = 0; j < 16; ++j) first += q[b * 32 + size_t(j)], second += q[b * 32 + 16 + size_t(j)];
    if (!out.offset_sum.empty()) out.offset_sum[size_t(r) * nb + b] = -out.offset * (first + second);
    if (!out.sum_pairs.empty() && b % 2 == 1) out.sum_pairs[(size_t(r) * nb + b) / 2] = simd::pack_int16_pair(previous, first + second);
    if (!out.half_sums.empty()) out.half_sums[size_t(r) * nb + b] = simd::pack_int16_pair(first, second);
    previous = first + second;
  }
}

// Sized for `rows` activation rows against `w`.
void resize_rows(QuantizedRows& out, int rows, const WeightMatrix& w) {
  const size_t nb = size_t(w.in / 32), grouped = w.grouped_rows > 0;
  out.block = weight_block_values(w.format);  // a scale per weight block: Q8_0 form, or Q8_K for the K-quants' 256
  out.scale.resize(size_t(rows) * size_t(w.in / out.block));
  out.q.resize(size_t(rows) * size_t(w.in));
  out.offset = w.format == WeightFormat::Q4_0 ? 8 : w.format == WeightFormat::Q8_0 ? 128 : 0;
  out.offset_sum.resize(grouped && out.offset > 0 ? size_t(rows) * nb : 0);
  out.sum_pairs.resize(grouped && (w.format == WeightFormat::Q4_K || w.format == WeightFormat::Q5_K) ? size_t(rows) * nb / 2 : 0);
  out.half_sums.resize(grouped && w.format == WeightFormat::Q6_K ? size_t(rows) * nb : 0);
}

const QuantizedRows& quantize_rows(const CpuContext& cpu, const float* x, int rows, const WeightMatrix& w) {
  const simd::KernelTable& t = *cpu.table;
  thread_local QuantizedRows scratch;
  QuantizedRows& out = scratch;  // the caller's: a pool thread naming `scratch` would get its own
  const int in = w.in;
  resize_rows(out, rows, w);
  cpu.pool->parallel_for(
      rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) quantize_row(t, x + r * in, in, out, r);
      },
      std::max<int64_t>(1, (int64_t(1) << 15) / std::max(1, in)));
  return out;
}

// Outputs [o0, o1) for every quantized row, four rows per weight load.
void matvec_q8act_block(const simd::KernelTable& t, const RowKernels& k, const QuantizedRows& x, int rows, const WeightMatrix& w,
                        float* y, int64_t o0, int64_t o1) {
  const int in = w.in;
  auto scale = [&](int r) { return x.scales(r, in); };
  auto q = [&](int r) { return &x.q[size_t(r) * size_t(in)]; };
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* wr = w.row(int(o));
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* s4[4] = {scale(r), scale(r + 1), scale(r + 2), scale(r + 3)};
      const int8_t* q4[4] = {q(r), q(r + 1), q(r + 2), q(r + 3)};
      float out[4];
      k.dot4_q8act(t, s4, q4, wr, in, out);
      for (int j = 0; j < 4; ++j) y[int64_t(r + j) * w.out + o] = out[j];
    }
    for (; r < rows; ++r) y[int64_t(r) * w.out + o] = k.dot_q8act(t, scale(r), q(r), wr, in);
  }
}

// A matrix's work units: its row groups (16 outputs each), then its other
// rows one each. Threads split units, so a group is never cut and an output
// is always computed by the same kernel, whatever the rows or threads.
int64_t work_units(const WeightMatrix& w) { return w.grouped_rows / simd::kGroupRows + (w.out - w.grouped_rows); }

int64_t unit_grain(const WeightMatrix& w, int64_t output_grain) {
  return w.grouped_rows > 0 ? std::max<int64_t>(1, output_grain / simd::kGroupRows) : output_grain;
}

// The row-group kernel of a block format (Q8_0 for the one left); `pair`:
// the one that takes two adjacent groups (Q4_0 and Q8_0 only, else null).
simd::GroupDot group_dot(const simd::RowGroupKernels& kernels, WeightFormat f, bool pair = false) {
  if (pair) return f == WeightFormat::Q4_0 ? kernels.q4_pair : f == WeightFormat::Q8_0 ? kernels.q8_pair : nullptr;
  switch (f) {
    case WeightFormat::Q4_0: return kernels.q4;
    case WeightFormat::Q4_K: return kernels.q4_k;
    case WeightFormat::Q5_K: return kernels.q5_k;
    case WeightFormat::Q6_K: return kernels.q6_k;
    default: return kernels.q8;
  }
}

// Units [u0, u1) for every quantized row: groups through the row-group
// kernel (up to kMaxGroupDotRows rows per weight load; two groups a call
// where the format has a pair kernel and there are two rows or more: one
// row's Q4_0 decode read 10-40% slower in pairs), the rest through
// matvec_q8act_block.
void matvec_q8act_units(const simd::KernelTable& t, const RowKernels& k, const QuantizedRows& x, int rows, const WeightMatrix& w,
                        float* y, int64_t u0, int64_t u1) {
  const int64_t groups = w.grouped_rows / simd::kGroupRows;
  if (u0 < groups) {
    const simd::RowGroupKernels& kernels = simd::row_group_kernels(t);
    const simd::GroupDot one = group_dot(kernels, w.format), pair = group_dot(kernels, w.format, true);
    const size_t nb = size_t(w.in / 32);
    constexpr int kPass = simd::kMaxGroupDotRows;
    simd::Q8Row xr[kPass];
    float out[kPass * 2 * simd::kGroupRows];
    const int64_t end = std::min(u1, groups);
    for (int64_t g = u0, count = 1; g < end; g += count) {
      count = pair && rows >= 2 && g + 1 < end ? 2 : 1;  // one row reads at the stream's pace either way
      const simd::GroupDot dot = count == 2 ? pair : one;
      for (int r = 0; r < rows; r += kPass) {
        const int n = std::min(kPass, rows - r);
        for (int j = 0; j < n; ++j)
          xr[j] = {x.scales(r + j, w.in), x.q.data() + size_t(r + j) * size_t(w.in),
                   x.offset_sum.empty() ? nullptr : x.offset_sum.data() + size_t(r + j) * nb,
                   x.sum_pairs.empty() ? nullptr : x.sum_pairs.data() + size_t(r + j) * nb / 2,
                   x.half_sums.empty() ? nullptr : x.half_sums.data() + size_t(r + j) * nb};
        dot(xr, n, w.group(int(g)), w.in, out);
        for (int j = 0; j < n; ++j)
          std::memcpy(y + int64_t(r + j) * w.out + g * simd::kGroupRows, out + j * count * simd::kGroupRows,
                      sizeof(float) * size_t(count) * simd::kGroupRows);
      }
    }
  }
  if (u1 > groups) matvec_q8act_block(t, k, x, rows, w, y, w.grouped_rows + std::max<int64_t>(0, u0 - groups), w.grouped_rows + (u1 - groups));
}

void check_ungrouped(const WeightMatrix& w) {
  if (w.grouped_rows > 0) throw Error("linear: block rows in groups take int8 activations only");
}

// SPLITDEC_GROUP_PREFILL=0: prefill on grouped rows takes the float GEMM
// (to measure one against the other).
// The scalar table keeps BLAS: its row-group kernel is plain C.
bool group_prefill(const simd::KernelTable& t) {
  static const bool on = env_switch_on("SPLITDEC_GROUP_PREFILL");
  return on && std::strcmp(t.name, "generic") != 0;
}

// bf16 products (gemm_bf16.h) on this context: enabled, and its table the
// process's best one (the one the CPU's AVX512_BF16 was checked against); a
// context pinned to another table takes that table's exact kernels.
bool bf16_products(const CpuContext& cpu) { return bf16_gemm_enabled() && cpu.table == &simd::best(); }

// Few rows, or rows that must not depend on each other: the row kernels of
// the context's table (never BLAS).
void matvec(const CpuContext& cpu, const float* x, int rows, const WeightMatrix& w, float* y) {
  const simd::KernelTable& t = *cpu.table;
  const int64_t grain = matvec_grain(w.in, rows);
  const RowKernels& k = row_kernels(w.format);
  if (w.int8_activations && k.dot_q8act) {
    const QuantizedRows& xq = quantize_rows(cpu, x, rows, w);
    cpu.pool->parallel_for(
        work_units(w), [&](int64_t u0, int64_t u1) { matvec_q8act_units(t, k, xq, rows, w, y, u0, u1); }, unit_grain(w, grain));
    return;
  }
  check_ungrouped(w);
  cpu.pool->parallel_for(w.out, [&](int64_t o0, int64_t o1) { matvec_block(t, k, x, rows, w, y, o0, o1); }, grain);
}

}  // namespace

void linear_with(const simd::KernelTable& t, const float* x, int rows, const WeightMatrix& w, float* y) {
  matvec(CpuContext::with_table(t), x, rows, w, y);
}

void linear_batch(const LinearJob* jobs, int count, const CpuContext& cpu) {
  const simd::KernelTable& t = *cpu.table;
  // Activations quantized here, on the caller, once per job: a few rows of
  // a few thousand values, not worth a dispatch of their own.
  std::vector<QuantizedRows> quantized(static_cast<size_t>(count));
  std::vector<int64_t> first(static_cast<size_t>(count) + 1, 0);  // each job's first output in the joint range
  for (int j = 0; j < count; ++j) {
    const LinearJob& job = jobs[j];
    const RowKernels& k = row_kernels(job.w->format);
    if (job.w->int8_activations && k.dot_q8act) {
      const int in = job.w->in;
      QuantizedRows& q = quantized[size_t(j)];
      resize_rows(q, job.rows, *job.w);
      for (int r = 0; r < job.rows; ++r) quantize_row(t, job.x + int64_t(r) * in, in, q, r);
    } else {
      check_ungrouped(*job.w);
    }
    first[size_t(j) + 1] = first[size_t(j)] + work_units(*job.w);
  }
  int64_t work = 0;
  bool grouped = false;  // a unit may be 16 outputs: no floor of 16 units then
  for (int j = 0; j < count; ++j) {
    work += int64_t(jobs[j].w->in) * std::max(1, jobs[j].rows) * jobs[j].w->out;
    grouped |= jobs[j].w->grouped_rows > 0;
  }
  const int64_t total = first.back();  // work units (work_units), all jobs end to end
  const int64_t grain = std::max<int64_t>(grouped ? 1 : 16, total * (int64_t(1) << 18) / std::max<int64_t>(1, work));
  cpu.pool->parallel_for(total, [&](int64_t a, int64_t b) {
    int j = int(std::upper_bound(first.begin(), first.end(), a) - first.begin()) - 1;
    for (; j < count && first[size_t(j)] < b; ++j) {
      const LinearJob& job = jobs[j];
      const int64_t u0 = std::max(a, first[size_t(j)]) - first[size_t(j)];
      const int64_t u1 = std::min(b, first[size_t(j) + 1]) - first[size_t(j)];
      if (u1 <= u0) continue;
      const RowKernels& k = row_kernels(job.w->format);
      if (job.w->int8_activations && k.dot_q8act)
        matvec_q8act_units(t, k, quantized[size_t(j)], job.rows, *job.w, job.y, u0, u1);
      else
        matvec_block(t, k, job.x, job.rows, *job.w, job.y, u0, u1);  // ungrouped: a unit is an output
    }
  }, grain);
}

void linear(const float* x, int rows, const WeightMatrix& w, float* y, bool rows_independent, const CpuContext& cpu) {
  if (rows < kGemmRows || rows_independent) {
    // bf16 products in decode too: half the instructions per multiply-add
    // of the f32 kernels, so batched steps are no longer bound by their own
    // loads (docs/kernels.md).
    if (matvec_bf16_takes(w.format) && bf16_products(cpu)) return matvec_bf16(x, rows, w, y, cpu);
    return matvec(cpu, x, rows, w, y);
  }
  // Row groups in prefill too: integer products (VNNI or maddubs) against
  // the quantized activations, a group held in cache while every row meets
  // it, instead of expanding blocks for a float GEMM; and a prompt's result
  // is then each row's decode result, however it is cut into chunks.
  if (w.grouped_rows > 0 && group_prefill(*cpu.table)) return matvec(cpu, x, rows, w, y);
  // bf16 products where the CPU has them, on every stored format but f32:
  // 2.7-3.6x the f32 GEMM (docs/benchmarks.md).
  const bool bf16 = bf16_gemm_takes(w.format) && bf16_products(cpu);
  if (w.int8_activations && row_kernels(w.format).dot_q8act) {
    // The GEMM sees the activations the decode kernels see (each row
    // quantized to Q8_0 or Q8_K blocks, then expanded), so a prompt's result does not
    // depend on how it was cut into chunks beyond f32 rounding (and, with
    // bf16 products, bf16 rounding).
    const QuantizedRows& xq = quantize_rows(cpu, x, rows, w);
    std::vector<float> xd(size_t(rows) * size_t(w.in));
    for (size_t i = 0; i < xd.size(); ++i) xd[i] = xq.scale[i / size_t(xq.block)] * float(xq.q[i]);
    return bf16 ? gemm_bf16(xd.data(), rows, w, y, cpu) : gemm_panels(*cpu.pool, xd.data(), rows, w, y);
  }
  if (bf16) return gemm_bf16(x, rows, w, y, cpu);
  gemm_panels(*cpu.pool, x, rows, w, y);
}

}  // namespace splitdec
