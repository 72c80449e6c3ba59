#include "serve/metrics.h"

#include <cstdio>

namespace splitdec::serve {

namespace {
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double v) {
  header(out, name, type, help);
  out += name + " " + number(v) + "\n";
}
}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t b = 0; b < bounds_.size(); ++b) {
    cumulative += counts_[b];
    out += name + "_bucket{le=\"" + number(bounds_[b]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics(int kv_slots)
    : kv_slots_(kv_slots),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      batch_sizes_({1, 2, 4, 8, 16, 32, 64, 128}),
      media_({0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::count_request(int status) {
  std::lock_guard<std::mutex> lock(m_);
  ++requests_by_status_[status];
}

void Metrics::count_tokens(int64_t prompt, int64_t completion) {
  std::lock_guard<std::mutex> lock(m_);
  prompt_tokens_ += prompt;
  completion_tokens_ += completion;
}

void Metrics::count_prefix_lookup(int64_t cached, bool evicted) {
  std::lock_guard<std::mutex> lock(m_);
  ++(cached > 0 ? prefix_hits_ : prefix_misses_);
  prefix_evictions_ += evicted;
  prompt_tokens_cached_ += cached;
}

void Metrics::set_queue_depth(int64_t n) {
  std::lock_guard<std::mutex> lock(m_);
  queue_depth_ = n;
}

void Metrics::set_active(int64_t n) {
  std::lock_guard<std::mutex> lock(m_);
  active_ = n;
}

void Metrics::set_kv_slots_used(int64_t n) {
  std::lock_guard<std::mutex> lock(m_);
  kv_slots_used_ = n;
}

void Metrics::set_batch(int64_t sequences) {
  std::lock_guard<std::mutex> lock(m_);
  batch_size_ = sequences;
  if (sequences > 0) {
    ++decode_steps_;
    batch_sizes_.observe(double(sequences));
  }
}

void Metrics::observe_time_to_first_token(double s) {
  std::lock_guard<std::mutex> lock(m_);
  ttft_.observe(s);
}

void Metrics::observe_inter_token_latency(double s) {
  std::lock_guard<std::mutex> lock(m_);
  itl_.observe(s);
}

void Metrics::media_waiting(int64_t delta) {
  std::lock_guard<std::mutex> lock(m_);
  media_waiting_ += delta;
}

void Metrics::observe_media_seconds(double s) {
  std::lock_guard<std::mutex> lock(m_);
  media_.observe(s);
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(m_);
  std::string out;
  header(out, "splitdec_requests_total", "counter", "HTTP requests answered, by status code.");
  for (const auto& [status, n] : requests_by_status_)
    out += "splitdec_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  scalar(out, "splitdec_prompt_tokens_total", "counter", "Prompt tokens of finished requests (cached ones included).", double(prompt_tokens_));
  scalar(out, "splitdec_prompt_tokens_cached_total", "counter", "Prompt tokens reused from the prefix cache, not prefilled.",
         double(prompt_tokens_cached_));
  scalar(out, "splitdec_prefix_cache_hits_total", "counter", "Requests that reused a prefix of a free slot's KV.", double(prefix_hits_));
  scalar(out, "splitdec_prefix_cache_misses_total", "counter", "Requests (prefix cache on) that prefilled their whole prompt.",
         double(prefix_misses_));
  scalar(out, "splitdec_prefix_cache_evictions_total", "counter",
         "Free slots whose held prompt was dropped for a request that shares none of it.", double(prefix_evictions_));
  scalar(out, "splitdec_generation_tokens_total", "counter", "Tokens generated.", double(completion_tokens_));
  scalar(out, "splitdec_requests_active", "gauge", "Requests accepted and not finished (queued or running).", double(active_));
  scalar(out, "splitdec_queue_depth", "gauge", "Requests waiting for a sequence slot.", double(queue_depth_));
  scalar(out, "splitdec_batch_size", "gauge", "Sequences in the last decode step.", double(batch_size_));
  scalar(out, "splitdec_decode_steps_total", "counter", "Batched decode steps run.", double(decode_steps_));
  scalar(out, "splitdec_kv_slots_used", "gauge", "KV sequence slots holding a live request.", double(kv_slots_used_));
  scalar(out, "splitdec_kv_slots_total", "gauge", "KV sequence slots (--max-sequences).", double(kv_slots_));
  batch_sizes_.render(out, "splitdec_decode_batch_sequences", "Sequences per decode step.");
  ttft_.render(out, "splitdec_time_to_first_token_seconds", "From request received to its first token chosen.");
  itl_.render(out, "splitdec_inter_token_latency_seconds", "Between consecutive tokens of one request.");
  scalar(out, "splitdec_media_waiting", "gauge", "Requests waiting for their media turn (--max-encodes).", double(media_waiting_));
  media_.render(out, "splitdec_media_seconds", "A request's media decoded, counted and encoded, once it had its turn.");
  return out;
}

}  // namespace splitdec::serve
