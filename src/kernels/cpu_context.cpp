#include "kernels/cpu_context.h"

#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

CpuContext::CpuContext(std::shared_ptr<ThreadPool> pool_, const simd::KernelTable& table_) : pool(std::move(pool_)), table(&table_) {
  if (!pool) throw Error("CpuContext: no thread pool");
}

CpuContext CpuContext::process_default() { return with_table(simd::best()); }
CpuContext CpuContext::with_table(const simd::KernelTable& table) { return CpuContext(ThreadPool::global(), table); }

}  // namespace splitdec
