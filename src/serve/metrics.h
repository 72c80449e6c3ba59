// The server's counters, gauges and latency histograms, rendered in the
// Prometheus text format for GET /metrics. Thread safe: handlers count
// requests, the scheduler the rest.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace splitdec::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative); one more for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(int kv_slots);

  void count_request(int status);
  void count_tokens(int64_t prompt, int64_t completion);
  // A request took a slot with `cached` prompt positions already there (0: a
  // miss); `evicted`: what the slot held (another prompt) was dropped for it.
  void count_prefix_lookup(int64_t cached, bool evicted);
  void set_queue_depth(int64_t n);
  // Requests accepted and not yet finished (queued or holding a slot).
  void set_active(int64_t n);
  // One decode step ran over `sequences` (0: none ran).
  void set_batch(int64_t sequences);
  void set_kv_slots_used(int64_t n);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  // Media turns (--max-encodes): requests waiting for one, and the time a
  // request's media took to decode and encode once it had its turn.
  void media_waiting(int64_t delta);
  void observe_media_seconds(double seconds);
  std::string render() const;

 private:
  mutable std::mutex m_;
  const int kv_slots_;
  std::map<int, int64_t> requests_by_status_;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  int64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_evictions_ = 0, prompt_tokens_cached_ = 0;
  int64_t active_ = 0, queue_depth_ = 0, batch_size_ = 0, kv_slots_used_ = 0, decode_steps_ = 0;
  int64_t media_waiting_ = 0;
  Histogram ttft_, itl_, batch_sizes_, media_;
};

}  // namespace splitdec::serve
