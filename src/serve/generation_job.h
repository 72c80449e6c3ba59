// One request's channel between the HTTP handler thread that waits on it
// and the scheduler thread that runs it: the scheduler pushes text and the
// outcome; the handler takes them (blocking with a timeout) or cancels.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "generate/json_schema.h"
#include "generate/sampler.h"
#include "generate/token_trie.h"
#include "generate/token_logprobs.h"
#include "model/prompt_batch.h"

namespace splitdec::serve {

// What the scheduler needs to run a request (fixed once submitted).
struct GenerationParams {
  PromptBatch prompt;
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings
  int64_t max_tokens = 16;
  int top_logprobs = -1;  // >= 0: report each token's log probability and this many alternatives
  // Structured output: the reply is a document of this grammar, its tokens
  // read through this vocabulary (both null: free text).
  std::shared_ptr<const JsonGrammar> json_grammar;
  std::shared_ptr<const TokenTrie> vocabulary;
};

struct GenerationOutcome {
  std::string finish_reason;  // "stop" or "length"; empty on error or cancel
  std::string text;           // the whole reply (stop strings cut)
  std::vector<TokenLogprob> logprobs;  // when asked for: one per generated token
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from the prefix cache, not prefilled
  std::string error;          // set when the generation failed after admission
  int error_status = 500;

  static GenerationOutcome failed(std::string why, int status) {
    GenerationOutcome o;
    o.error = std::move(why);
    o.error_status = status;
    return o;
  }
};

class GenerationJob {
 public:
  // `received`: when the request arrived (its parse and media encode count in its time to first token).
  explicit GenerationJob(GenerationParams params,
                         std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now())
      : params_(std::move(params)), received_(received) {}

  const GenerationParams& params() const { return params_; }
  std::chrono::steady_clock::time_point received() const { return received_; }

  // --- Handler side ---
  struct Update {
    std::string text;  // final text since the last take
    std::vector<TokenLogprob> logprobs;  // the tokens chosen since the last take (when asked for)
    bool done = false;
  };
  // Waits until text, log probabilities or the end arrive, or `timeout` passes.
  Update take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, timeout, [&] { return !text_.empty() || !logprobs_.empty() || done_; });
    Update u{std::move(text_), std::move(logprobs_), done_};
    text_.clear();
    logprobs_.clear();
    return u;
  }
  // Valid once take() reported done.
  GenerationOutcome outcome() const {
    std::lock_guard<std::mutex> lock(m_);
    return outcome_;
  }
  // The client is gone: the scheduler ends the request at its next step.
  void cancel() { cancelled_.store(true); }

  // --- Scheduler side ---
  bool cancelled() const { return cancelled_.load(); }
  void push_text(const std::string& text) {
    {
      std::lock_guard<std::mutex> lock(m_);
      text_ += text;
    }
    cv_.notify_all();
  }
  void push_logprobs(std::vector<TokenLogprob>::const_iterator begin, std::vector<TokenLogprob>::const_iterator end) {
    {
      std::lock_guard<std::mutex> lock(m_);
      logprobs_.insert(logprobs_.end(), begin, end);
    }
    cv_.notify_all();
  }
  void finish(GenerationOutcome outcome) {
    {
      std::lock_guard<std::mutex> lock(m_);
      outcome_ = std::move(outcome);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  const GenerationParams params_;
  const std::chrono::steady_clock::time_point received_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  GenerationOutcome outcome_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace splitdec::serve
