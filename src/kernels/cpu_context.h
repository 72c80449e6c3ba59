// What a CPU kernel runs on: the worker threads and the SIMD table. The CPU
// backend (backend/cpu_backend.h) makes one per call and passes it down
// through the model's layers to the decoder's kernels (linear, the
// attention paths, the bf16 GEMMs, the MLP activation), so they do not pick
// their own threads or instruction set. The bf16 products (gemm_bf16.h)
// run only where the context's table is the process's best one, for which
// the CPU was checked. Exact conversions keep their own choice (weight rows
// expanded to f32, OpenBLAS inside a prefill panel): no bit depends on it.
// Code outside a backend call (media towers, load-time conversion, tools,
// tests) takes CpuContext::process_default(): the process-wide pool and the
// best table for this CPU.
#pragma once

#include <memory>

namespace splitdec {

class ThreadPool;
namespace simd {
struct KernelTable;
}

struct CpuContext {
  // Both set (Error otherwise): a context always has threads and a table.
  CpuContext(std::shared_ptr<ThreadPool> pool, const simd::KernelTable& table);

  // Shared: ThreadPool::set_threads may replace the process's pool while a
  // call runs; the call finishes on the one it started with.
  std::shared_ptr<ThreadPool> pool;
  const simd::KernelTable* table;

  static CpuContext process_default();
  // The process's pool with another table (tests and benchmarks of each target).
  static CpuContext with_table(const simd::KernelTable& table);
};

}  // namespace splitdec
