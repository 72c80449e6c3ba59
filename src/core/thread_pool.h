// One process-wide pool of worker threads, sized to the cores (or
// --threads). Every parallel kernel runs on it, and BLAS is kept
// single-threaded, so there is never more than one thread per core.
//
// Threads: any thread may call parallel_for; jobs from different callers
// run one after another (each gets the whole pool), never sharing a job's
// state. A job started from inside a job runs inline. set_threads replaces
// the pool: call it before other threads use it.
#pragma once

#include <cstdint>
#include <functional>

namespace splitdec {

class ThreadPool {
 public:
  static ThreadPool& global();
  // Resizes the global pool (0: one thread per core). Not while any thread uses it.
  static void set_threads(int n);

  int size() const { return threads_; }
  // Splits [0, n) into contiguous ranges and runs fn(begin, end) on the
  // workers and the calling thread; returns when every range is done.
  // `grain`: the smallest range worth a thread.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  ~ThreadPool();

 private:
  explicit ThreadPool(int threads);
  struct State;
  State* state_;
  int threads_;
};

}  // namespace splitdec
