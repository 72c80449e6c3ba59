#include "serve/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "generate/json_constraint.h"
#include "prompt/prompt_text.h"
#include "serve/prefill_pieces.h"
#include "tokenizer/tokenizer.h"

namespace splitdec::serve {

using Clock = std::chrono::steady_clock;

// One choice of a request, on its own KV slot: prefilling piece by piece,
// then decoding. A request with n choices is n of these: choice 0 (the
// leader) prefills the prompt but its last token or media block, each other
// choice takes a copy of that KV, and every choice then feeds the tail itself.
struct Scheduler::Live {
  std::shared_ptr<GenerationJob> job;
  int choice = 0;
  std::shared_ptr<int> group_left;  // choices of the job still live (the last one to end ends the job)
  int seq = -1;
  int64_t cached = 0;                       // prompt positions its slot already held (the prefix cache)
  std::vector<std::pair<int, int>> pieces;  // prompt positions still to prefill, in order
  size_t next_piece = 0;
  int request = -1;  // the step generator's id once the last piece started
  size_t tokens_seen = 0;
  size_t logprobs_sent = 0;
  Clock::time_point last_token;

  // The log probabilities of the tokens chosen since the last call, to the handler.
  void send_logprobs(const Request& r) {
    if (r.logprobs.size() <= logprobs_sent) return;
    job->push_logprobs(choice, r.logprobs.begin() + ptrdiff_t(logprobs_sent), r.logprobs.end());
    logprobs_sent = r.logprobs.size();
  }
};

namespace {
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Where the tail of a one-row prompt starts: its last token, or the whole
// media block it ends inside (a block is fed whole). Never before `from`.
int tail_begin(const PromptBatch& p, int from) {
  const std::vector<int> ids = p.sequence_block_ids(0);
  int t = p.seq - 1;
  while (t > from && ids[size_t(t)] >= 0 && ids[size_t(t - 1)] == ids[size_t(t)]) --t;
  return t;
}
}  // namespace

Scheduler::Scheduler(const Model& model, const Tokenizer* tokenizer, SchedulerOptions options, Metrics& metrics)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      metrics_(metrics),
      cache_(options_.max_sequences) {
  if (options_.max_sequences < 1) throw InputError("--max-sequences must be >= 1");
  if (options_.prefill_budget < 1) throw InputError("--prefill-budget must be >= 1");
  if (options_.max_queue < 0) throw InputError("--max-queue must be >= 0");
  SessionOptions so = options_.session;
  so.max_sequences = options_.max_sequences;
  so.keep_trace = false;  // a server runs forever: no entry per step
  session_ = std::make_unique<Session>(model_, 0, so);
  source_ = std::make_unique<SessionSource>(*session_);
  steps_ = std::make_unique<StepGenerator>(*source_, model_.config(), tokenizer_);
  stop_tokens_ = reply_stop_tokens(model_.config(), tokenizer_);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
    accepting_ = false;
  }
  wake_.notify_all();
  thread_.join();
}

Scheduler::Admission Scheduler::submit(std::shared_ptr<GenerationJob> job) {
  if (job->choices() > options_.max_sequences)
    throw InputError("n: " + std::to_string(job->choices()) + " choices need as many sequence slots; this server has " +
                     std::to_string(options_.max_sequences) + " (--max-sequences)");
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!accepting_) return Admission::Closed;
    // Every slot and every queue place taken (a request takes one per choice).
    if (slots_wanted_ + job->choices() > int64_t(options_.max_sequences) + options_.max_queue) return Admission::QueueFull;
    slots_wanted_ += job->choices();
    queue_.push_back(std::move(job));
    ++running_;
    metrics_.set_active(running_);
    metrics_.set_queue_depth(int64_t(queue_.size()));
  }
  wake_.notify_all();
  return Admission::Accepted;
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(m_);
  accepting_ = false;
}

void Scheduler::wait_idle() {
  std::unique_lock<std::mutex> lock(m_);
  idle_.wait(lock, [&] { return running_ == 0; });
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<GenerationJob>> admitted;
    {
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !live_.empty(); });
      if (stopping_) {
        for (auto& job : queue_) {
          job->fail(GenerationOutcome::failed("the server is shutting down", 503));
          slots_wanted_ -= job->choices();
        }
        running_ -= int64_t(queue_.size());
        queue_.clear();
        lock.unlock();
        fail_all("the server is shutting down", 503);
        return;
      }
      // First come, first served: a request with n choices waits for n free slots.
      size_t slots = live_.size();
      while (!queue_.empty() && slots + size_t(queue_.front()->choices()) <= size_t(options_.max_sequences)) {
        slots += size_t(queue_.front()->choices());
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.set_queue_depth(int64_t(queue_.size()));
    }
    try {
      // The step's jobs go before media encodes (thread_pool.h).
      ThreadPool::ForegroundSpan step;
      admit(admitted);
      prefill();
      decode();
    } catch (const std::exception& e) {
      // Not a client's fault (those are refused before anything runs): end
      // what is live rather than leave it half-stepped.
      fail_all(std::string("internal error: ") + e.what(), 500);
    }
    reap();
  }
}

void Scheduler::admit(std::vector<std::shared_ptr<GenerationJob>>& admitted) {
  int64_t failed = 0, failed_slots = 0;
  for (auto& job : admitted) {
    std::vector<std::unique_ptr<Live>> group;
    auto left = std::make_shared<int>(job->choices());
    try {
      for (int c = 0; c < job->choices(); ++c) {
        group.push_back(std::make_unique<Live>());
        Live& l = *group.back();
        l.job = job;
        l.choice = c;
        l.group_left = left;
        if (c > 0) {  // a copy of the leader's KV comes before its tail (prefill())
          l.seq = session_->open_sequence();
          cache_.forget(l.seq);
          steps_->forget_sequence(l.seq);
          continue;
        }
        open_slot(l);  // a slot is free: admission counted them
        // Pieces are cut from where the slot's content ends, so a cached prefix is never fed again.
        const PromptBatch& p = job->params().prompt;
        const int end = job->choices() > 1 ? tail_begin(p, int(l.cached)) : p.seq;
        if (end > int(l.cached)) l.pieces = prefill_pieces(p.slice(int(l.cached), end), options_.prefill_budget);
        for (auto& [b, e] : l.pieces) b += int(l.cached), e += int(l.cached);
        if (end < p.seq) l.pieces.emplace_back(end, p.seq);
      }
    } catch (const std::exception& e) {
      for (auto& l : group)
        if (l->seq >= 0 && session_->live(l->seq)) session_->close_sequence(l->seq);
      job->fail(GenerationOutcome::failed(std::string("internal error: ") + e.what(), 500));
      ++failed;
      failed_slots += job->choices();
      continue;
    }
    for (auto& l : group) live_.push_back(std::move(l));
  }
  metrics_.set_kv_slots_used(int64_t(live_.size()));
  if (failed > 0) finished(failed, failed_slots);
}

void Scheduler::open_slot(Live& l) {
  if (!options_.prefix_cache) {
    l.seq = session_->open_sequence();
    steps_->forget_sequence(l.seq);
    return;
  }
  const PromptBatch& prompt = l.job->params().prompt;
  PrefixCache::Reuse reuse = cache_.choose(prompt, *session_);
  session_->open_sequence(reuse.slot);
  l.seq = reuse.slot;
  const bool held = cache_.holds(l.seq);
  cache_.forget(l.seq);  // its content changes from here; remembered again when the request ends well
  // The generator's state of the slot follows its KV: the kept positions'
  // history (the repetition penalty reads it), no pending token. A history
  // that disagrees would be a bug: the slot then starts over.
  const std::vector<int>& history = steps_->history(l.seq);
  if (reuse.cached > 0 && (history.size() < size_t(reuse.cached) ||
                           !std::equal(history.begin(), history.begin() + reuse.cached, prompt.tokens.begin())))
    reuse.cached = 0;
  session_->rewind(l.seq, reuse.cached);  // 0: starts over
  if (reuse.cached > 0) {
    steps_->truncate_history(l.seq, size_t(reuse.cached));
    steps_->set_pending(l.seq, -1);
  } else {
    steps_->forget_sequence(l.seq);
  }
  l.cached = reuse.cached;
  metrics_.count_prefix_lookup(reuse.cached, held && reuse.cached == 0);
}

// Whole pieces, first admitted first, while the budget lasts; the first
// piece of an iteration always runs (a media block may exceed the budget).
// A request's last piece starts its reply: with n choices, the leader's
// slot is copied to the other choices first and each feeds the last piece.
void Scheduler::prefill() {
  int64_t budget = options_.prefill_budget;
  bool ran = false;
  for (auto& l : live_) {
    while (l->choice == 0 && l->request < 0 && !l->job->cancelled() && !l->job->failed()) {
      const auto [begin, end] = l->pieces[l->next_piece];
      const GenerationParams& p = l->job->params();
      const bool last = l->next_piece + 1 == l->pieces.size();
      std::vector<Live*> group{l.get()};
      if (last)
        for (auto& other : live_)
          if (other->job == l->job && other->choice > 0) group.push_back(other.get());
      const int64_t cost = int64_t(group.size()) * (end - begin);  // every choice feeds the last piece
      if (ran && cost > budget) return;
      // Before the leader feeds its tail. Outside the refusal below: a copy
      // that fails is the server's fault (the loop ends every request).
      for (Live* g : group)
        if (g != l.get()) {
          session_->copy_sequence(l->seq, g->seq);
          steps_->copy_sequence(l->seq, g->seq);
        }
      try {
        if (!last) steps_->prefill({l->seq}, p.prompt.slice(begin, end));  // a prompt piece: fed, nothing chosen
        for (Live* g : last ? group : std::vector<Live*>{}) {
          RequestOptions ro;
          ro.sampling = p.sampling;
          ro.sampling.seed += uint64_t(g->choice);  // choice 0 is what n = 1 would give
          ro.stop_tokens = stop_tokens_;
          ro.stop_strings = p.stop;
          ro.max_new_tokens = int(p.max_tokens);
          ro.top_logprobs = p.top_logprobs;
          if (p.json_grammar) ro.constraint = std::make_shared<JsonConstraint>(p.json_grammar, p.vocabulary, stop_tokens_);
          ro.on_text = [job = g->job.get(), c = g->choice](const std::string& text) { job->push_text(c, text); };
          const int id = steps_->start({g->seq}, p.prompt.slice(begin, end), {ro})[0];
          g->request = id;
          g->last_token = Clock::now();
          if (g->choice == 0) metrics_.observe_time_to_first_token(seconds(g->last_token - g->job->received()));
          g->tokens_seen = steps_->request(id).tokens.size();
          g->send_logprobs(steps_->request(id));
        }
      } catch (const Error& e) {
        // The prompt was refused (the session checks a piece before feeding
        // it; the request's options were checked when it was parsed):
        // every choice ends with it.
        l->job->fail(GenerationOutcome::failed(e.what(), 400));
        for (Live* g : group)
          if (g->request >= 0 && !steps_->request(g->request).finished) steps_->cancel(g->request);
        break;
      }
      ++l->next_piece;
      budget -= cost;
      ran = true;
      if (budget <= 0) return;
    }
  }
}

void Scheduler::decode() {
  for (auto& l : live_)
    if (l->request >= 0 && (l->job->cancelled() || l->job->failed()) && !steps_->request(l->request).finished)
      steps_->cancel(l->request);
  int64_t stepping = 0;
  for (auto& l : live_) stepping += l->request >= 0 && !steps_->request(l->request).finished;
  metrics_.set_batch(stepping);
  if (stepping == 0) return;
  steps_->step();
  const Clock::time_point now = Clock::now();
  for (auto& l : live_) {
    if (l->request < 0) continue;
    const Request& r = steps_->request(l->request);
    l->send_logprobs(r);
    const size_t n = r.tokens.size();
    if (n > l->tokens_seen) {
      metrics_.observe_inter_token_latency(seconds(now - l->last_token));
      l->tokens_seen = n;
      l->last_token = now;
    }
  }
}

void Scheduler::reap() {
  int64_t ended = 0, ended_slots = 0;  // jobs, and their choices
  for (auto it = live_.begin(); it != live_.end();) {
    Live& l = **it;
    bool done = false;
    if (l.request >= 0) {
      const Request& r = steps_->request(l.request);
      if (r.finished) {
        GenerationOutcome o;
        o.text = r.text;
        o.logprobs = r.logprobs;
        o.prompt_tokens = l.job->params().prompt.seq;
        o.cached_tokens = l.cached;
        o.completion_tokens = int64_t(r.tokens.size());
        switch (r.stop_reason) {
          case StopReason::StopToken:
          case StopReason::StopString: o.finish_reason = "stop"; break;
          case StopReason::MaxTokens:
          case StopReason::Length: o.finish_reason = "length"; break;
          case StopReason::Cancelled: o.error = "cancelled", o.error_status = 499; break;
          case StopReason::NonFinite: o.error = "the model produced NaN or Inf logits", o.error_status = 500; break;
          case StopReason::NoAllowedToken:
            o.error = "response_format: no token of the vocabulary continues the reply's JSON", o.error_status = 500;
            break;
        }
        metrics_.count_tokens(l.choice == 0 ? o.prompt_tokens : 0, o.completion_tokens);
        // A choice that failed fails the request: the other choices stop at their next step.
        if (!o.error.empty()) l.job->fail(o);
        // Its slot keeps what its KV holds: the prompt, then the tokens fed after it.
        if (options_.prefix_cache && r.stop_reason != StopReason::NonFinite)
          cache_.remember(l.seq, l.job->params().prompt, r.tokens, session_->length(l.seq));
        l.job->finish(l.choice, std::move(o));
        steps_->release(l.request);
        done = true;
      }
    } else if (l.job->failed()) {  // refused, or another choice failed, before it started
      done = true;
    } else if (l.job->cancelled()) {  // left while its prompt was being prefilled
      l.job->fail(GenerationOutcome::failed("cancelled", 499));
      done = true;
    }
    if (done) {
      session_->close_sequence(l.seq);
      if (!options_.prefix_cache) steps_->forget_sequence(l.seq);
      if (--*l.group_left == 0) ++ended, ended_slots += l.job->choices();  // the job ends with its last choice
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
  if (ended > 0) finished(ended, ended_slots);
  metrics_.set_kv_slots_used(int64_t(live_.size()));
}

void Scheduler::fail_all(const std::string& why, int status) {
  for (auto& l : live_) {
    if (l->request >= 0) {
      if (!steps_->request(l->request).finished) steps_->cancel(l->request);
      steps_->release(l->request);
    }
    l->job->fail(GenerationOutcome::failed(why, status));
    try {
      session_->close_sequence(l->seq);
      steps_->forget_sequence(l->seq);
    } catch (const std::exception&) {
    }
  }
  int64_t jobs = 0, slots = 0;
  for (auto& l : live_)
    if (--*l->group_left == 0) ++jobs, slots += l->job->choices();
  live_.clear();
  finished(jobs, slots);
}

void Scheduler::finished(int64_t jobs, int64_t slots) {
  std::lock_guard<std::mutex> lock(m_);
  running_ -= jobs;
  slots_wanted_ -= slots;
  metrics_.set_active(running_);
  if (running_ == 0) idle_.notify_all();
}

}  // namespace splitdec::serve
