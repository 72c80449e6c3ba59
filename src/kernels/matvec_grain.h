// How many outputs of a decode matvec a pool range should hold: ~256K
// multiply-adds, a range worth waking a thread for. Shared by every matvec
// (linear, matvec_bf16) so they split work alike.
#pragma once

#include <algorithm>
#include <cstdint>

namespace splitdec {

inline int64_t matvec_grain(int in, int rows) {
  return std::max<int64_t>(16, (int64_t(1) << 18) / (int64_t(in) * std::max(1, rows)));
}

}  // namespace splitdec
