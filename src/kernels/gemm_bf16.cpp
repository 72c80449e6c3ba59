#include "kernels/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matvec_grain.h"
#include "kernels/simd/gemm_bf16_avx512.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

namespace {
std::atomic<bool>& exact_flag() {
  static std::atomic<bool> exact = [] {
    const char* v = std::getenv("SPLITDEC_EXACT_GEMM");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return exact;
}
thread_local int exact_scopes = 0;  // ExactGemmOnThisThread alive on this thread
}  // namespace

bool exact_gemm() { return exact_flag().load(std::memory_order_relaxed); }
void set_exact_gemm(bool exact) { exact_flag().store(exact, std::memory_order_relaxed); }

bool bf16_gemm_supported() {
  static const bool supported = __builtin_cpu_supports("avx512bf16") && std::strcmp(simd::best().name, "avx512") == 0;
  return supported;
}

ExactGemmOnThisThread::ExactGemmOnThisThread() { ++exact_scopes; }
ExactGemmOnThisThread::~ExactGemmOnThisThread() { --exact_scopes; }

bool bf16_gemm_enabled() { return !exact_gemm() && exact_scopes == 0 && bf16_gemm_supported(); }

// The K-quants have no panel expansion of their own: their prefill takes
// the row groups (or the f32 GEMM on rows expanded by row_f32).
bool bf16_gemm_takes(WeightFormat f) { return f != WeightFormat::F32 && weight_block_values(f) != 256; }

namespace {
simd::PanelWeights panel_weights(WeightFormat f) {
  switch (f) {
    case WeightFormat::BF16: return simd::PanelWeights::BF16;
    case WeightFormat::F16: return simd::PanelWeights::F16;
    case WeightFormat::Q8_0: return simd::PanelWeights::Q8_0;
    case WeightFormat::Q4_0: return simd::PanelWeights::Q4_0;
    case WeightFormat::F32:
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K: break;
  }
  throw Error(std::string("gemm_bf16: ") + weight_format_name(f) + " weights take the f32 GEMM");
}

// x rounded to bf16 pairs, (in + 1) / 2 words a row, once per call (not
// once per panel or weight row). The caller's buffer, reused: pool threads
// only read it.
const AlignedVector<uint32_t>& bf16_pairs_of(ThreadPool& pool, const float* x, int rows, int in) {
  thread_local AlignedVector<uint32_t> scratch;
  AlignedVector<uint32_t>& x_pairs = scratch;  // a pool thread naming `scratch` would get its own
  const int64_t pairs = (in + 1) / 2;
  x_pairs.resize(size_t(rows) * size_t(pairs));
  pool.parallel_for(
      rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) simd::bf16_pairs_from_f32(x + r * in, in, x_pairs.data() + r * pairs);
      },
      std::max<int64_t>(1, (int64_t(1) << 15) / std::max(1, in)));
  return x_pairs;
}
}  // namespace

void gemm_bf16(const float* x, int rows, const WeightMatrix& w, float* y, const CpuContext& cpu) {
  ThreadPool& pool = *cpu.pool;
  const AlignedVector<uint32_t>& x_pairs = bf16_pairs_of(pool, x, rows, w.in);
  // Panels as gemm_panels cuts them (a multiple of 16 outputs, 64-256, at
  // least ~8 per matrix), so each thread packs a panel's weights once for
  // all rows. Edges depend on the matrix only; the sums on neither.
  const int panel = std::clamp((w.out + 8 * 16 - 1) / (8 * 16) * 16, 64, 256);
  const int64_t panels = (w.out + panel - 1) / panel;
  const simd::PanelWeights format = panel_weights(w.format);
  const int64_t row_bytes = int64_t(w.row_bytes());
  pool.parallel_for(panels, [&](int64_t p0, int64_t p1) {
    thread_local AlignedVector<uint32_t> packed;  // this pool thread's
    thread_local std::vector<uint8_t> rows_as_stored;  // a panel of row groups, back in row layout
    packed.resize(simd::bf16_panel_scratch_words(panel));
    for (int64_t p = p0; p < p1; ++p) {
      const int o0 = int(p * panel), n = std::min(panel, w.out - o0);
      if (o0 < w.grouped_rows) {
        rows_as_stored.resize(size_t(n) * size_t(row_bytes));
        for (int j = 0; j < n; ++j) w.copy_row(o0 + j, rows_as_stored.data() + size_t(j) * size_t(row_bytes));
        simd::gemm_bf16_panel(x_pairs.data(), rows, rows_as_stored.data(), row_bytes, format, w.in, 0, n, y + o0, w.out, packed.data());
      } else {
        simd::gemm_bf16_panel(x_pairs.data(), rows, w.data.data(), row_bytes, format, w.in, o0, n, y + o0, w.out, packed.data());
      }
    }
  });
}

bool matvec_bf16_takes(WeightFormat f) { return f == WeightFormat::BF16 || f == WeightFormat::F16; }

void matvec_bf16(const float* x, int rows, const WeightMatrix& w, float* y, const CpuContext& cpu) {
  if (!matvec_bf16_takes(w.format)) throw Error("matvec_bf16: bf16 or f16 weights only");
  if (!bf16_gemm_supported()) throw Error("matvec_bf16: this CPU (or SPLITDEC_SIMD) has no AVX512_BF16");
  const simd::PanelWeights format = panel_weights(w.format);
  const AlignedVector<uint32_t>& x_pairs = bf16_pairs_of(*cpu.pool, x, rows, w.in);
  const int64_t pairs = (w.in + 1) / 2;
  const auto* wb = reinterpret_cast<const uint16_t*>(w.data.data());
  cpu.pool->parallel_for(
      w.out, [&](int64_t o0, int64_t o1) { simd::matvec_bf16_products(x_pairs.data(), rows, pairs, wb, format, w.in, o0, o1, y, w.out); },
      matvec_grain(w.in, rows));
}

}  // namespace splitdec
