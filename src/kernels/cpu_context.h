// What a CPU kernel runs on: the worker threads and the SIMD table. The CPU
// backend (backend/cpu_backend.h) makes one per call and passes it down
// through the model's layers to every kernel of the decoder, so the kernels
// do not pick their own threads or instruction set. Code outside a backend
// call (media towers, load-time conversion, tools, tests) takes
// CpuContext::process_default(): the process-wide pool and the best table
// for this CPU.
#pragma once

#include <memory>

namespace splitdec {

class ThreadPool;
namespace simd {
struct KernelTable;
}

struct CpuContext {
  // Shared: ThreadPool::set_threads may replace the process's pool while a
  // call runs; the call finishes on the one it started with.
  std::shared_ptr<ThreadPool> pool;
  const simd::KernelTable* table = nullptr;

  static CpuContext process_default();
  // The process's pool with another table (tests and benchmarks of each target).
  static CpuContext with_table(const simd::KernelTable& table);
};

}  // namespace splitdec
