// Step-wise generation over many sequences of one logits source: start a
// request on a sequence (its prompt is prefilled and its first token
// chosen), then step() advances every live request by one token with one
// batched decode call; a request ends on a stop token, a stop string, its
// token budget, or cancel(). Requests join and leave between steps, so a
// server can batch whatever conversations are live.
//
// Each sequence remembers the token chosen last and not yet fed (a
// request's final token): the next request on that sequence feeds it first.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/logits_source.h"
#include "generate/sampler.h"
#include "generate/stop_strings.h"
#include "generate/text_stream.h"
#include "generate/token_logprobs.h"
#include "io/model_config.h"

namespace splitdec {

class Tokenizer;

// Length: the sequence's KV capacity is full (the reply keeps what it made).
// NonFinite: the logits held NaN or Inf; no token was chosen from them
// (callers turn this into an error). NoAllowedToken: the request's
// constraint allowed no token of the vocabulary (an error too).
enum class StopReason { MaxTokens, StopToken, StopString, Cancelled, Length, NonFinite, NoAllowedToken };
const char* stop_reason_name(StopReason r);

struct RequestOptions {
  SamplingOptions sampling;
  // Requests that share a sampler draw from one random stream, live requests
  // in id order at each step (a batch moved together stays reproducible); null: its own.
  std::shared_ptr<Sampler> sampler;
  std::vector<int> stop_tokens;           // empty: the config's EOS ids
  std::vector<std::string> stop_strings;  // need a tokenizer
  int max_new_tokens = 16;
  bool keep_step_logits = false;          // keep the logits each token was chosen from
  int top_logprobs = -1;                  // >= 0: keep each chosen token's log probability and this many alternatives
  // Tokens it refuses are never chosen (structured output); one per request.
  // Log probabilities are the model's, before its mask.
  std::shared_ptr<TokenConstraint> constraint;
  std::function<void(const std::string&)> on_text;  // final text as it is produced
};

struct Request {
  int seq = -1;
  RequestOptions options;
  std::vector<int> tokens;       // chosen tokens, a stop token included
  std::string text;              // cut before a stop string (needs a tokenizer)
  std::vector<float> step_logits;  // [tokens, vocab] when kept
  std::vector<TokenLogprob> logprobs;  // one per token, a stop token not included (top_logprobs >= 0)
  int64_t prompt_tokens = 0;     // tokens fed by the prompt (a pending token included, padding not)
  bool finished = false;
  StopReason stop_reason = StopReason::MaxTokens;
  StopStrings stops;
  std::optional<TextStream> stream;  // reads `stops` (a request never moves: it lives on the heap)
};

class StepGenerator {
 public:
  // `tokenizer` may be null: then no text, no stop strings.
  StepGenerator(LogitsSource& source, const ModelConfig& config, const Tokenizer* tokenizer);
  ~StepGenerator();

  // Starts one request per sequence of `seqs` (none of them may have a live
  // request): row i of `prompt` is appended to seqs[i] after its pending
  // token, the rows are prefilled together, and each first token is chosen.
  // `prompt_logits`, when given, receives [n, seq, vocab] of every prompt
  // position (every sequence must then have a pending token, or none).
  // Returns the request ids. Options, and the prompt as far as the source
  // can check it, are checked before anything is fed; if the prompt fails
  // later, or an on_text callback throws, the new requests are cancelled.
  std::vector<int> start(const std::vector<int>& seqs, const PromptBatch& prompt, const std::vector<RequestOptions>& options,
                         std::vector<float>* prompt_logits = nullptr);
  // Appends row i of `prompt` to seqs[i] after its pending token and
  // chooses nothing: the pieces of a long prompt fed over several calls (a
  // server's prefill budget) before the piece that starts the request. None
  // of the sequences may have a live request; checked before anything is fed.
  void prefill(const std::vector<int>& seqs, const PromptBatch& prompt);
  // Feeds the last token of every live request in one decode call and
  // chooses the next; a request whose sequence has no room left ends with
  // StopReason::Length instead. Returns false (and does nothing) when none is live.
  bool step();
  // Ends a live request now (its last token stays pending on its sequence;
  // text it held back is not streamed).
  void cancel(int request);
  // Forgets a finished request.
  void release(int request);

  const Request& request(int id) const;
  bool any_live() const;
  // The token chosen last on `seq` and not yet fed (-1: none).
  int pending(int seq) const;
  // Sets or clears (-1) the pending token of `seq` (after the caller rewound it).
  void set_pending(int seq, int token);
  // Tokens fed or chosen on `seq` so far (the repetition penalty's history).
  const std::vector<int>& history(int seq) const;
  // Keeps the first `size` tokens of the history of `seq` (after a rewind).
  void truncate_history(int seq, size_t size);
  void forget_sequence(int seq);
  // Sequence `to` takes the state of `from` (history, pending token), after
  // its caller gave it `from`'s KV (Session::copy_sequence).
  void copy_sequence(int from, int to);

 private:
  struct SequenceState {
    int pending = -1;
    std::vector<int> history;
  };
  SequenceState& state(int seq);
  // Feeds prompt rows after each sequence's pending token (start, prefill):
  // returns each row's last logits [n, vocab] (every position's in
  // *prompt_logits when given); histories gain the prompt, fed[b] counts
  // the positions fed to seqs[b].
  std::vector<float> feed(const std::vector<int>& seqs, const PromptBatch& prompt, std::vector<float>* prompt_logits,
                          std::vector<int64_t>* fed);
  Request& live_request(int id);
  // Chooses request `id`'s next token from `logits` [vocab]; ends it when a
  // stop is reached. Returns the text that became final (streamed by the
  // caller once every request has chosen, so a throwing callback leaves
  // every request consistent).
  std::string choose(int id, const float* logits);
  std::string finish(Request& r, StopReason why);
  void stream(const std::vector<std::pair<int, std::string>>& ready);

  LogitsSource& src_;
  const ModelConfig& c_;
  const Tokenizer* tok_;
  std::map<int, std::unique_ptr<Request>> requests_;  // by id, until released
  int next_id_ = 0;
  std::vector<SequenceState> seqs_;  // by sequence id
};

}  // namespace splitdec
