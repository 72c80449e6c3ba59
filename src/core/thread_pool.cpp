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
// The innermost ThreadPool::Background scope of this thread.
thread_local const ThreadPool::Background* background_scope = nullptr;

struct InJob {
  InJob() { in_job = true; }
  ~InJob() { in_job = false; }
};

// One class of jobs (foreground or background): its callers queue on
// `gate`; the job in progress is described by the rest. Its fields are set
// before `open` (seq_cst) and read after it.
struct JobSlot {
  std::mutex gate;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::atomic<int64_t> n{0}, step{1}, next{0};
  std::atomic<bool> open{false};
  std::atomic<int> active{0};    // threads inside take_ranges
  std::exception_ptr error;      // the first exception a range threw (under State::mu)
  std::condition_variable done;  // with State::mu: `active` fell to 0 after the job closed

  bool has_ranges() const { return open.load() && next.load() < n.load(); }
};

enum class Take { Ran, Empty, NotNow };
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

// Ranges per thread: a few balance uneven work without much overhead; a
// background job is cut finer, since a foreground job that arrives waits
// for the background ranges already running.
constexpr int64_t kRangesPerThread = 4, kBackgroundRangesPerThread = 16;

struct ThreadPool::State {
  std::mutex mu;
  std::condition_variable wake;   // workers: work appeared, or stop
  std::condition_variable quiet;  // background callers: their turn may have come
  std::vector<std::thread> workers;
  JobSlot fg, bg;
  std::atomic<int> spans{0};  // open ForegroundSpans
  // Background ranges that may start inside a span: one is granted each
  // time the spans close while background work waits, so it progresses even
  // when a new span opens right away (a server decoding without pause).
  std::atomic<int> grant{0};
  std::atomic<int> background_callers{0};  // inside a background parallel_for
  std::atomic<bool> stop{false};
  int sleeping = 0;            // workers blocked on `wake` (under mu)
  int waiting_background = 0;  // background callers blocked on `quiet` (under mu)
  int spins = kSpins;          // 0 when the pool has more threads than CPUs to run them

  bool background_could_start() const { return !fg.has_ranges() && (spans.load() == 0 || grant.load() > 0); }
  bool work_for_worker() const { return stop.load() || fg.has_ranges() || (bg.has_ranges() && background_could_start()); }

  // Runs ranges of the slot's job until none is left (or, with `one`, at
  // most one); false when it found none. Never throws: the first exception
  // is kept for the caller and the remaining ranges are skipped.
  bool take_ranges(JobSlot& s, bool one) {
    s.active.fetch_add(1);
    bool ran = false;
    if (s.open.load()) {
      const int64_t n = s.n.load(), step = s.step.load();
      InJob scope;
      for (int64_t begin; (begin = s.next.fetch_add(step)) < n;) {
        ran = true;
        try {
          (*s.fn)(begin, std::min(n, begin + step));
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!s.error) s.error = std::current_exception();
          s.next.store(n);
        }
        if (one) break;
      }
    }
    // The caller waits for `active` only once it has closed the job: either
    // it sees 0 or this thread sees the job closed and wakes it.
    if (s.active.fetch_sub(1) == 1 && !s.open.load()) {
      std::lock_guard<std::mutex> lock(mu);
      s.done.notify_all();
    }
    return ran;
  }

  // Whether background work may start now; inside a span this takes a grant.
  bool background_may_start() {
    if (fg.has_ranges()) return false;
    if (spans.load() == 0) return true;
    int g = grant.load();
    do {
      if (g <= 0) return false;
    } while (!grant.compare_exchange_weak(g, g - 1));
    return true;
  }

  // One background range, if the foreground lets it start now.
  Take take_background() {
    if (!bg.has_ranges()) return Take::Empty;
    if (!background_may_start()) return Take::NotNow;
    return take_ranges(bg, true) ? Take::Ran : Take::Empty;
  }

  // A background caller's wait until `ready()`.
  template <class Ready>
  void wait_for_background_turn(Ready ready) {
    for (int i = 0; i < spins; ++i) {
      if (ready()) return;
      cpu_relax();
    }
    std::unique_lock<std::mutex> lock(mu);
    ++waiting_background;
    quiet.wait(lock, ready);
    --waiting_background;
  }

  // Under mu: whatever may have made work available is announced.
  void announce() {
    if (sleeping > 0) wake.notify_all();
    if (waiting_background > 0) quiet.notify_all();
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

ThreadPool::Background::Background(std::function<bool()> cancelled)
    : cancelled_(std::move(cancelled)), outer_(background_scope) {
  background_scope = this;
}
ThreadPool::Background::~Background() { background_scope = outer_; }

ThreadPool::ForegroundSpan::ForegroundSpan() : pool_(global()) { pool_->state_->spans.fetch_add(1); }
ThreadPool::ForegroundSpan::~ForegroundSpan() {
  State& s = *pool_->state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.spans.fetch_sub(1) == 1 && s.background_callers.load() > 0) {
    s.grant.store(1);
    s.announce();
  }
}

ThreadPool::ThreadPool(int threads) : state_(new State), threads_(threads) {
  // Spinning only pays when every thread has a CPU of its own (a container
  // quota or a busy machine would turn the spin into stolen time).
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && threads > CPU_COUNT(&cpus)) state_->spins = 0;
  for (int t = 1; t < threads; ++t)
    state_->workers.emplace_back([s = state_] {
      for (;;) {
        bool ready = false;
        for (int i = 0; i < s->spins && !(ready = s->work_for_worker()); ++i) cpu_relax();
        if (!ready) {
          std::unique_lock<std::mutex> lock(s->mu);
          ++s->sleeping;
          s->wake.wait(lock, [&] { return s->work_for_worker(); });
          --s->sleeping;
        }
        if (s->stop.load()) return;
        // The foreground first, and again after every background range.
        if (!s->take_ranges(s->fg, false)) s->take_background();
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
  State& s = *state_;
  if (in_job) return fn(0, n);
  const bool background = background_scope != nullptr;
  for (const Background* b = background_scope; b; b = b->outer_)
    if (b->cancelled_ && b->cancelled_()) throw Cancelled();
  const int64_t parts = std::min<int64_t>(threads_, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  struct Caller {  // counted while a background caller has work, for the grants
    std::atomic<int>* callers;
    ~Caller() {
      if (callers) callers->fetch_sub(1);
    }
  } caller{background ? &s.background_callers : nullptr};
  if (background) s.background_callers.fetch_add(1);
  if (parts <= 1) {
    // Not a job of the pool, but on the same cores: it waits its turn too.
    if (background)
      while (!s.background_may_start()) s.wait_for_background_turn([&] { return s.background_could_start(); });
    return fn(0, n);
  }
  JobSlot& job = background ? s.bg : s.fg;
  std::lock_guard<std::mutex> gate(job.gate);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const int64_t ranges = parts * (background ? kBackgroundRangesPerThread : kRangesPerThread);
    job.fn = &fn;
    job.n = n;
    job.step = std::max<int64_t>(1, (n + ranges - 1) / ranges);
    job.next = 0;
    job.error = nullptr;
    job.open = true;
    s.announce();
  }
  if (background) {
    for (;;) {
      const Take t = s.take_background();
      if (t == Take::Empty) break;
      if (t == Take::NotNow) s.wait_for_background_turn([&] { return !s.bg.has_ranges() || s.background_could_start(); });
    }
  } else {
    s.take_ranges(job, false);
  }
  // Every range has been handed out: close the job, then wait until every
  // thread is done with `fn` before it goes.
  job.open = false;
  for (int i = 0; i < s.spins && job.active.load() != 0; ++i) cpu_relax();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    job.done.wait(lock, [&] { return job.active.load() == 0; });
    std::swap(error, job.error);
    // Background work waiting for the foreground's ranges to end may go on.
    if (!background && s.background_callers.load() > 0 && s.background_could_start()) s.announce();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace splitdec
