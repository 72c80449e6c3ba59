// Continuous batching: one thread owns the session and the step generator.
// Each iteration it (1) ends the requests whose clients left, (2) gives free
// KV slots to waiting requests, (3) prefills at most `prefill_budget` prompt
// positions of admitted requests, each request on its own (never batched
// with another request's prompt, so its chunks are the ones of a solo run),
// (4) runs one batched decode step for every live request, and (5) frees the
// slots of the requests that ended. A freed slot keeps its KV for the
// prefix cache (prefix_cache.h): a request that shares a prefix with what a
// free slot holds takes that slot and prefills only the rest. Handler threads only submit jobs and
// wait on their channels (generation_job.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "generate/logits_source.h"
#include "generate/step_generator.h"
#include "pipeline/session.h"
#include "serve/generation_job.h"
#include "serve/metrics.h"
#include "serve/prefix_cache.h"

namespace splitdec {
class Model;
class Tokenizer;
}  // namespace splitdec

namespace splitdec::serve {

struct SchedulerOptions {
  SessionOptions session;   // plan, capacity (--max-length), chunk, KV dtype
  int max_sequences = 16;   // KV slots: requests decoded together
  int prefill_budget = 512; // prompt positions prefilled per iteration (a media block is never split)
  int max_queue = 64;       // choices waiting for a slot (a request with n choices takes n places)
  bool prefix_cache = true; // reuse a free slot's KV for a prompt that shares its prefix
};

class Scheduler {
 public:
  Scheduler(const Model& model, const Tokenizer* tokenizer, SchedulerOptions options, Metrics& metrics);
  // Ends every request (queued ones get a 503) and joins the thread.
  ~Scheduler();

  enum class Admission { Accepted, QueueFull, Closed };
  Admission submit(std::shared_ptr<GenerationJob> job);
  // Refuses new jobs from now on; what was accepted still runs.
  void close();
  // Blocks until no job is queued or running.
  void wait_idle();
  int64_t capacity() const { return options_.session.capacity; }
  int max_sequences() const { return options_.max_sequences; }

 private:
  struct Live;
  void loop();
  void admit(std::vector<std::shared_ptr<GenerationJob>>& admitted);
  void prefill();
  void decode();
  void reap();
  // Gives `l` a slot: the prefix cache's pick rewound to the shared prefix, or an empty one.
  void open_slot(Live& l);
  void fail_all(const std::string& why, int status);
  // `jobs` requests with `slots` choices in all ended: their places free up.
  void finished(int64_t jobs, int64_t slots);

  const Model& model_;
  const Tokenizer* tokenizer_;
  const SchedulerOptions options_;
  Metrics& metrics_;
  std::vector<int> stop_tokens_;

  // Used by the scheduler thread only (made before it starts).
  std::unique_ptr<Session> session_;
  std::unique_ptr<SessionSource> source_;
  std::unique_ptr<StepGenerator> steps_;
  std::vector<std::unique_ptr<Live>> live_;
  PrefixCache cache_;

  std::mutex m_;
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  int64_t running_ = 0;       // requests admitted and not yet finished (guarded by m_)
  int64_t slots_wanted_ = 0;  // their choices: each holds a KV slot or a queue place (guarded by m_)
  bool accepting_ = true, stopping_ = false;
  std::thread thread_;
};

}  // namespace splitdec::serve
