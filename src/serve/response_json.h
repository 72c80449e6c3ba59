// The OpenAI response bodies: a whole chat.completion / text_completion,
// and the chunks of a streamed one, each as a server-sent event line.
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
  ResponseWriter(bool chat, std::string model, std::string echo = {}, const Tokenizer* logprobs = nullptr);
  // A chat with tools: the reply's tool calls (prompt/tool_call_format.h)
  // become the message's tool_calls and finish_reason "tool_calls"; streamed,
  // text from a call marker on is held back and the calls are sent whole at
  // the end. `reply_prefix`: what the reply was made to start with.
  void expect_tool_calls(std::string reply_prefix);

  // Non-streamed: the whole body.
  std::string completion(const GenerationOutcome& o) const;
  // Streamed: each returns one "data: {...}\n\n" event.
  std::string first_event() const;  // chat: the role; completions: the echoed prompt, if any
  // "" when there is nothing to send yet (text held back for a tool call).
  std::string text_event(const std::string& text, const std::vector<TokenLogprob>& logprobs = {}) const;
  // With tool calls: the held-back text and the calls first.
  std::string finish_event(const std::string& finish_reason) const;
  std::string usage_event(const GenerationOutcome& o) const;
  static std::string error_event(const std::string& message, const std::string& type);
  static std::string done_event() { return "data: [DONE]\n\n"; }

 private:
  std::string chunk(const std::string& text, const char* finish_reason, bool role,
                    const std::vector<TokenLogprob>* logprobs = nullptr) const;
  nlohmann::json logprobs_json(const std::vector<TokenLogprob>& entries) const;
  bool chat_;
  std::string model_, id_, echo_;
  int64_t created_;
  const Tokenizer* tokenizer_;
  mutable size_t text_offset_;  // /v1/completions' text_offset of the next token (a stream's chunks in order)
  bool tools_ = false;
  mutable std::string tool_text_;   // the reply so far, its forced prefix included
  mutable size_t tool_streamed_ = 0;  // of tool_text_, sent as content
};

}  // namespace splitdec::serve
