// One request's channel between the HTTP handler thread that waits on it
// and the scheduler thread that runs it: the scheduler pushes each choice's
// text and outcome; the handler takes them (blocking with a timeout) or cancels.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "generate/json_schema.h"
#include "generate/sampler.h"
#include "generate/token_logprobs.h"
#include "generate/token_trie.h"
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
  // OpenAI's n: replies to the same prompt, each on its own KV slot after
  // one shared prefill; choice i samples with seed + i.
  int choices = 1;
};

struct GenerationOutcome {
  std::string finish_reason;           // "stop" or "length"; empty on error or cancel
  std::string text;                    // the whole reply (stop strings cut)
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
      : params_(std::move(params)), received_(received), choices_(size_t(std::max(1, params_.choices))) {}

  const GenerationParams& params() const { return params_; }
  int choices() const { return int(choices_.size()); }
  std::chrono::steady_clock::time_point received() const { return received_; }

  // --- Handler side ---
  struct Delta {
    std::string text;                    // final text since the last take
    std::vector<TokenLogprob> logprobs;  // the tokens chosen since the last take (when asked for)
  };
  struct Update {
    std::vector<Delta> choices;  // one per choice, in index order
    // Choices that ended well since the last take, with their outcome (a
    // stream sends each one's finish_reason as it ends).
    std::vector<std::pair<int, GenerationOutcome>> ended;
    bool done = false;
    bool empty() const {
      return std::all_of(choices.begin(), choices.end(),
                         [](const Delta& d) { return d.text.empty() && d.logprobs.empty(); });
    }
  };
  // Waits until text, log probabilities or the end arrive, or `timeout` passes.
  Update take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, timeout, [&] { return news_ || done_locked(); });
    news_ = false;
    Update u;
    u.done = done_locked();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      u.choices.push_back({std::move(c.text), std::move(c.logprobs)});
      c.text.clear();
      c.logprobs.clear();
      if (c.finished && !c.reported && !failure_ && c.outcome.error.empty()) {
        u.ended.emplace_back(int(i), c.outcome);
        c.reported = true;
      }
    }
    return u;
  }
  // Valid once take() reported done: one per choice (or, when the request
  // failed, one holding the error).
  std::vector<GenerationOutcome> outcomes() const {
    std::lock_guard<std::mutex> lock(m_);
    if (failure_) return {*failure_};
    std::vector<GenerationOutcome> out;
    for (const Choice& c : choices_) out.push_back(c.outcome);
    return out;
  }
  // The client is gone: the scheduler ends the request at its next step.
  void cancel() { cancelled_.store(true); }

  // --- Scheduler side ---
  bool cancelled() const { return cancelled_.load(); }
  // Whether fail() ended the request (its other choices stop too). Read
  // for every live choice at every step: a flag, not the lock.
  bool failed() const { return failed_.load(); }
  void push_text(int choice, const std::string& text) {
    update([&] { choices_.at(size_t(choice)).text += text; });
  }
  void push_logprobs(int choice, std::vector<TokenLogprob>::const_iterator begin,
                     std::vector<TokenLogprob>::const_iterator end) {
    update([&] {
      auto& l = choices_.at(size_t(choice)).logprobs;
      l.insert(l.end(), begin, end);
    });
  }
  void finish(int choice, GenerationOutcome outcome) {
    update([&] {
      Choice& c = choices_.at(size_t(choice));
      c.outcome = std::move(outcome);
      c.finished = true;
    });
  }
  // Ends the whole request with an error (the first failure wins).
  void fail(GenerationOutcome outcome) {
    update([&] {
      if (!failure_) failure_ = std::move(outcome);
      failed_.store(true);
    });
  }

 private:
  struct Choice {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    bool finished = false, reported = false;  // reported: handed to take() in `ended`
    GenerationOutcome outcome;
  };
  template <typename F>
  void update(F change) {
    {
      std::lock_guard<std::mutex> lock(m_);
      change();
      news_ = true;
    }
    cv_.notify_all();
  }
  bool done_locked() const {
    return failure_ || std::all_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.finished; });
  }

  const GenerationParams params_;
  const std::chrono::steady_clock::time_point received_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Choice> choices_;
  std::optional<GenerationOutcome> failure_;
  bool news_ = false;
  std::atomic<bool> cancelled_{false}, failed_{false};
};

}  // namespace splitdec::serve
