// The OpenAI response bodies: a whole chat.completion / text_completion,
// and the chunks of a streamed one, each as a server-sent event line. A
// request with n choices has n entries in `choices` (a stream's chunks say
// which by their index); each choice keeps its own streaming state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "serve/generation_job.h"

namespace splitdec {
class Tokenizer;
}

namespace splitdec::serve {

class ResponseWriter {
 public:
  // `echo`: text the reply starts with (/v1/completions' echo: the prompt).
  // `logprobs`: the tokenizer that names the tokens of `logprobs` when the
  // request asked for them; null: "logprobs": null.
  ResponseWriter(bool chat, std::string model, std::string echo = {}, const Tokenizer* logprobs = nullptr, int choices = 1);
  // A chat with tools: the reply's tool calls (prompt/tool_call_format.h)
  // become the message's tool_calls and finish_reason "tool_calls"; streamed,
  // text from a call marker on is held back and the calls are sent whole at
  // the end. `reply_prefix`: what the reply was made to start with.
  void expect_tool_calls(std::string reply_prefix);

  // Non-streamed: the whole body, one outcome per choice.
  std::string completion(const std::vector<GenerationOutcome>& choices) const;
  std::string completion(const GenerationOutcome& o) const { return completion(std::vector<GenerationOutcome>{o}); }
  // Streamed: each returns "data: {...}\n\n" events.
  std::string first_event() const;  // per choice; chat: the role; completions: the echoed prompt, if any
  // "" when there is nothing to send yet (text held back for a tool call).
  std::string text_event(const std::string& text, const std::vector<TokenLogprob>& logprobs = {}, int choice = 0) const;
  // With tool calls: the held-back text and the calls first.
  std::string finish_event(const std::string& finish_reason, int choice = 0) const;
  // Usage of the whole request: the prompt once, every choice's tokens.
  std::string usage_event(const std::vector<GenerationOutcome>& choices) const;
  static std::string error_event(const std::string& message, const std::string& type);
  static std::string done_event() { return "data: [DONE]\n\n"; }

 private:
  // What a stream of one choice has sent so far.
  struct ChoiceState {
    size_t text_offset = 0;     // /v1/completions' text_offset of the next token (a stream's chunks in order)
    std::string tool_text;      // the reply so far, its forced prefix included
    size_t tool_streamed = 0;   // of tool_text, sent as content
  };
  std::string chunk(int choice, const std::string& text, const char* finish_reason, bool role,
                    const std::vector<TokenLogprob>* logprobs = nullptr) const;
  nlohmann::json logprobs_json(ChoiceState& state, const std::vector<TokenLogprob>& entries) const;
  ChoiceState& state(int choice) const;
  bool chat_;
  std::string model_, id_, echo_;
  int64_t created_;
  const Tokenizer* tokenizer_;
  bool tools_ = false;
  mutable std::vector<ChoiceState> choices_;
};

}  // namespace splitdec::serve
