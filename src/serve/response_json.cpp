#include "serve/response_json.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "prompt/tool_call_format.h"
#include "tokenizer/tokenizer.h"

namespace splitdec::serve {

using nlohmann::json;

namespace {
std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string(chat ? "chatcmpl-" : "cmpl-") +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) + "-" +
         std::to_string(counter.fetch_add(1));
}
std::string event(const json& j) {
  // Invalid UTF-8 from a tokenizer's byte pieces is replaced, never thrown on.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}
// The prompt is prefilled once for every choice: its counts come from the
// first; the completion tokens are every choice's.
json usage(const std::vector<GenerationOutcome>& choices) {
  const GenerationOutcome& first = choices.at(0);
  int64_t completion = 0;
  for (const GenerationOutcome& o : choices) completion += o.completion_tokens;
  return {{"prompt_tokens", first.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}};
}
}  // namespace

ResponseWriter::ResponseWriter(bool chat, std::string model, std::string echo, const Tokenizer* logprobs, int choices)
    : chat_(chat),
      model_(std::move(model)),
      id_(new_id(chat)),
      echo_(std::move(echo)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      tokenizer_(logprobs),
      choices_(size_t(std::max(1, choices)), ChoiceState{echo_.size(), {}, 0}) {}

ResponseWriter::ChoiceState& ResponseWriter::state(int choice) const { return choices_.at(size_t(choice)); }

// OpenAI's shapes: chat {"content": [{token, logprob, bytes, top_logprobs}]};
// completions {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
json ResponseWriter::logprobs_json(ChoiceState& state, const std::vector<TokenLogprob>& entries) const {
  if (!tokenizer_) return nullptr;
  auto text = [&](int id) { return tokenizer_->decode({id}); };
  auto bytes = [](const std::string& t) {
    json out = json::array();
    for (unsigned char c : t) out.push_back(int(c));
    return out;
  };
  if (chat_) {
    json content = json::array();
    for (const TokenLogprob& e : entries) {
      json top = json::array();
      for (const auto& [id, lp] : e.top) {
        const std::string t = text(id);
        top.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes(t)}});
      }
      const std::string t = text(e.token);
      content.push_back({{"token", t}, {"logprob", e.logprob}, {"bytes", bytes(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const TokenLogprob& e : entries) {
    const std::string t = text(e.token);
    tokens.push_back(t);
    token_logprobs.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[text(id)] = lp;
    top_logprobs.push_back(top);
    offsets.push_back(state.text_offset);
    state.text_offset += t.size();
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

void ResponseWriter::expect_tool_calls(std::string reply_prefix) {
  tools_ = true;
  for (ChoiceState& c : choices_) c.tool_text = reply_prefix, c.tool_streamed = 0;
}

namespace {

// OpenAI's ids: "call_" and 24 random letters and digits.
std::string tool_call_id() {
  static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += digits[rng() % (sizeof digits - 1)];
  return id;
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", tool_call_id()},
                 {"type", "function"},
                 {"function",
                  {{"name", calls[i].name},
                   {"arguments", calls[i].arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}};
    if (indexed) call["index"] = i;  // a stream's deltas say which call they extend
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

std::string ResponseWriter::completion(const std::vector<GenerationOutcome>& outcomes) const {
  json choices = json::array();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const GenerationOutcome& o = outcomes[i];
    ChoiceState& st = state(int(i));
    json choice = {{"index", i}, {"finish_reason", o.finish_reason}, {"logprobs", logprobs_json(st, o.logprobs)}};
    if (chat_ && tools_) {
      const ToolCallReply r = parse_tool_calls(st.tool_text + o.text);
      choice["message"] = {{"role", "assistant"},
                           {"content", r.content.empty() && !r.calls.empty() ? json(nullptr) : json(r.content)}};
      if (!r.calls.empty()) {
        choice["message"]["tool_calls"] = tool_calls_json(r.calls, false);
        choice["finish_reason"] = "tool_calls";
      }
    } else if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", o.text}};
    } else {
      choice["text"] = echo_ + o.text;
    }
    choices.push_back(std::move(choice));
  }
  const json body = {{"id", id_},           {"object", chat_ ? "chat.completion" : "text_completion"},
                     {"created", created_}, {"model", model_},
                     {"choices", choices},  {"usage", usage(outcomes)}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ResponseWriter::chunk(int index, const std::string& text, const char* finish_reason, bool role,
                                  const std::vector<TokenLogprob>* logprobs) const {
  json choice = {{"index", index},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)},
                 {"logprobs", logprobs ? logprobs_json(state(index), *logprobs) : json(nullptr)}};
  if (chat_) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!finish_reason) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return event({{"id", id_},
                {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", json::array({choice})}});
}

std::string ResponseWriter::first_event() const {
  std::string events;
  for (int c = 0; c < int(choices_.size()); ++c) {
    if (chat_)
      events += chunk(c, "", nullptr, true);
    else if (!echo_.empty())
      events += chunk(c, echo_, nullptr, false);
  }
  return events;
}
std::string ResponseWriter::text_event(const std::string& text, const std::vector<TokenLogprob>& logprobs,
                                       int index) const {
  if (!tools_) return chunk(index, text, nullptr, false, tokenizer_ ? &logprobs : nullptr);
  ChoiceState& st = state(index);
  st.tool_text += text;
  // Only the part not sent yet can hold the first marker (scanning from there
  // keeps a long reply linear).
  const size_t held = std::min(st.tool_streamed, st.tool_text.size());
  const size_t ready = held + content_before_tool_calls(st.tool_text.substr(held));
  std::string now;
  if (ready > st.tool_streamed)
    now = st.tool_text.substr(st.tool_streamed, ready - st.tool_streamed), st.tool_streamed = ready;
  if (now.empty() && (logprobs.empty() || !tokenizer_)) return "";
  return chunk(index, now, nullptr, false, tokenizer_ ? &logprobs : nullptr);
}

std::string ResponseWriter::finish_event(const std::string& reason, int index) const {
  if (!tools_) return chunk(index, "", reason.c_str(), false);
  const ChoiceState& st = state(index);
  const ToolCallReply r = parse_tool_calls(st.tool_text);
  std::string events;
  // What was held back and is not a call (a marker that never became one).
  if (r.content.size() > st.tool_streamed) events += chunk(index, r.content.substr(st.tool_streamed), nullptr, false);
  if (r.calls.empty()) return events + chunk(index, "", reason.c_str(), false);
  json choice = {{"index", index},
                 {"finish_reason", nullptr},
                 {"logprobs", nullptr},
                 {"delta", {{"tool_calls", tool_calls_json(r.calls, true)}}}};
  events += event({{"id", id_},
                   {"object", "chat.completion.chunk"},
                   {"created", created_},
                   {"model", model_},
                   {"choices", json::array({choice})}});
  return events + chunk(index, "", "tool_calls", false);
}

std::string ResponseWriter::usage_event(const std::vector<GenerationOutcome>& o) const {
  return event({{"id", id_},
                {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", json::array()},
                {"usage", usage(o)}});
}

std::string ResponseWriter::error_event(const std::string& message, const std::string& type) {
  return event({{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}});
}

}  // namespace splitdec::serve
