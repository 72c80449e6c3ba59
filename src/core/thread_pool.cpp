#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace splitdec {

namespace {
// Set while this thread runs ranges of a job: a kernel that starts another
// job from inside one runs it inline instead of waiting for the pool.
thread_local bool in_job = false;

struct InJob {
  InJob() { in_job = true; }
  ~InJob() { in_job = false; }
};
}  // namespace

// Waiting spins briefly before it sleeps: a decode step runs hundreds of
// jobs of tens of microseconds each, and a futex sleep and wake per job
// costs about as much as the job. About 50-100 us of pause instructions.
constexpr int kSpins = 2000;
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct ThreadPool::State {
  std::mutex job;  // one job at a time: callers on other threads queue here
  std::mutex mu;
  std::condition_variable wake, done;
  std::vector<std::thread> workers;
  // Set under `mu` before `generation` moves (release); a worker that sees
  // the new generation (acquire) sees them.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, step = 1;
  std::atomic<int64_t> next{0};
  std::atomic<int> busy{0};  // workers still in the current job
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  int sleeping = 0;          // workers blocked on `wake` (under mu)
  int spins = kSpins;        // 0 when the pool has more threads than CPUs to run them
  std::exception_ptr error;  // the first exception a range threw

  // Takes ranges until none are left. Never throws: the first exception is
  // kept for the caller and the remaining ranges are skipped.
  void drain() {
    InJob scope;
    for (;;) {
      const int64_t begin = next.fetch_add(step);
      if (begin >= n) return;
      try {
        (*fn)(begin, std::min(n, begin + step));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  }
};

namespace {
std::shared_ptr<ThreadPool>& global_slot() {
  static std::shared_ptr<ThreadPool> pool;
  return pool;
}
std::mutex& global_mutex() {
  static std::mutex mu;
  return mu;
}
int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }
}  // namespace

std::shared_ptr<ThreadPool> ThreadPool::global() {
  std::lock_guard<std::mutex> lock(global_mutex());
  auto& p = global_slot();
  if (!p) p = std::make_shared<ThreadPool>(default_threads());
  return p;
}

void ThreadPool::set_threads(int n) {
  auto fresh = std::make_shared<ThreadPool>(n > 0 ? n : default_threads());
  {
    std::lock_guard<std::mutex> lock(global_mutex());
    std::swap(global_slot(), fresh);
  }
  // `fresh` now holds the old pool: it is destroyed here, outside the lock,
  // or by the last job still running on it.
}

ThreadPool::ThreadPool(int threads) : state_(new State), threads_(threads) {
  // Spinning only pays when every thread has a CPU of its own (a container
  // quota or a busy machine would turn the spin into stolen time).
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && threads > CPU_COUNT(&cpus)) state_->spins = 0;
  for (int t = 1; t < threads; ++t)
    state_->workers.emplace_back([s = state_] {
      uint64_t seen = 0;
      auto ready = [&] { return s->stop.load() || s->generation.load(std::memory_order_acquire) != seen; };
      for (;;) {
        bool woke = false;
        for (int i = 0; i < s->spins && !(woke = ready()); ++i) cpu_relax();
        if (!woke) {
          std::unique_lock<std::mutex> lock(s->mu);
          ++s->sleeping;
          s->wake.wait(lock, ready);
          --s->sleeping;
        }
        if (s->stop.load()) return;
        seen = s->generation.load(std::memory_order_acquire);
        s->drain();
        if (s->busy.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          std::lock_guard<std::mutex> lock(s->mu);  // the caller may be asleep on `done`
          s->done.notify_one();
        }
      }
    });
}

// Only reached when no job holds the pool (shared ownership), so no worker
// is inside a job.
ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();  // sleeping workers; spinning ones see `stop`
  for (auto& w : state_->workers) w.join();
  delete state_;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  const int64_t parts = std::min<int64_t>(threads_, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (parts <= 1 || in_job) {
    fn(0, n);
    return;
  }
  State& s = *state_;
  std::lock_guard<std::mutex> job(s.job);
  bool any_asleep = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.fn = &fn;
    s.n = n;
    // A few ranges per thread balance uneven work without much overhead.
    s.step = std::max<int64_t>(1, (n + parts * 4 - 1) / (parts * 4));
    s.next = 0;
    s.busy.store(int(s.workers.size()));
    s.error = nullptr;
    s.generation.fetch_add(1, std::memory_order_release);
    any_asleep = s.sleeping > 0;
  }
  if (any_asleep) s.wake.notify_all();
  s.drain();
  // Every worker is done with `fn` before it goes.
  for (int i = 0; i < s.spins && s.busy.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.done.wait(lock, [&] { return s.busy.load(std::memory_order_acquire) == 0; });
    std::swap(error, s.error);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace splitdec
