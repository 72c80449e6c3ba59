#include "kernels/cpu_context.h"

#include "core/thread_pool.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

CpuContext CpuContext::process_default() { return with_table(simd::best()); }
CpuContext CpuContext::with_table(const simd::KernelTable& table) { return {ThreadPool::global(), &table}; }

}  // namespace splitdec
