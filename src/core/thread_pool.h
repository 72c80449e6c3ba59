// One process-wide pool of worker threads, sized to the cores (or
// --threads). Every parallel kernel runs on it (a backend call's kernels on
// the one its CpuContext holds, taken from here), and BLAS is kept
// single-threaded, so there is never more than one thread per core.
//
// Threads: any thread may call parallel_for; jobs from different callers
// run one after another (each gets the whole pool), never sharing a job's
// state. A job started from inside a job runs inline. global() hands out
// shared ownership, so set_threads may replace the pool while jobs run: they
// finish on the old one. An exception thrown by a range is rethrown to the
// caller once every range of the job has stopped.
//
// Priority: a thread inside a `Background` scope (the server's media
// encodes) runs background jobs. Their ranges start only while no
// foreground job has ranges left to take and no `ForegroundSpan` is open (a
// server step: hundreds of short jobs with gaps between them); a foreground
// job runs beside a background one and waits at most for the background
// ranges already running, so an image encode cannot starve other streams'
// decode steps. Background work progresses between spans.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>

namespace splitdec {

class ThreadPool {
 public:
  // The current pool; hold the pointer for the length of a job.
  static std::shared_ptr<ThreadPool> global();
  // Replaces the global pool (0: one thread per core).
  static void set_threads(int n);

  int size() const { return threads_; }
  // Splits [0, n) into contiguous ranges and runs fn(begin, end) on the
  // workers and the calling thread; returns when every range is done.
  // `grain`: the smallest range worth a thread.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // The calling thread's jobs are background jobs while one lives. When
  // `cancelled` says so, the thread's next job throws Cancelled instead of
  // starting (a server's encode whose client left stops between jobs).
  class Background {
   public:
    explicit Background(std::function<bool()> cancelled = {});
    ~Background();
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

   private:
    std::function<bool()> cancelled_;
    const Background* outer_;
    friend class ThreadPool;
  };
  struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("background work cancelled") {}
  };
  // No background range starts on the global pool while one lives.
  class ForegroundSpan {
   public:
    ForegroundSpan();
    ~ForegroundSpan();
    ForegroundSpan(const ForegroundSpan&) = delete;
    ForegroundSpan& operator=(const ForegroundSpan&) = delete;

   private:
    std::shared_ptr<ThreadPool> pool_;
  };

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  struct State;
  State* state_;
  int threads_;
};

}  // namespace splitdec
