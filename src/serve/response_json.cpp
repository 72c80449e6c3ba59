#include "serve/response_json.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "prompt/tool_call_format.h"

namespace splitdec::serve {

using nlohmann::json;

namespace {
std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) +
         "-" + std::to_string(counter.fetch_add(1));
}
std::string event(const json& j) {
  // Invalid UTF-8 from a tokenizer's byte pieces is replaced, never thrown on.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}
json usage(const GenerationOutcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}
}  // namespace

ResponseWriter::ResponseWriter(bool chat, std::string model, std::string echo, const Tokenizer* logprobs)
    : chat_(chat), model_(std::move(model)), id_(new_id(chat)), echo_(std::move(echo)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      tokenizer_(logprobs), text_offset_(echo_.size()) {}

// OpenAI's shapes: chat {"content": [{token, logprob, bytes, top_logprobs}]};
// completions {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
json ResponseWriter::logprobs_json(const std::vector<TokenLogprob>& entries) const {
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
    offsets.push_back(text_offset_);
    text_offset_ += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

void ResponseWriter::expect_tool_calls(std::string reply_prefix) {
  tools_ = true;
  tool_text_ = std::move(reply_prefix);
  tool_streamed_ = 0;
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
    json call = {{"id", tool_call_id()}, {"type", "function"},
                 {"function", {{"name", calls[i].name},
                               {"arguments", calls[i].arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}};
    if (indexed) call["index"] = i;  // a stream's deltas say which call they extend
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

std::string ResponseWriter::completion(const GenerationOutcome& o) const {
  json choice = {{"index", 0}, {"finish_reason", o.finish_reason}, {"logprobs", logprobs_json(o.logprobs)}};
  if (chat_ && tools_) {
    const ToolCallReply r = parse_tool_calls(tool_text_ + o.text);
    choice["message"] = {{"role", "assistant"}, {"content", r.content.empty() && !r.calls.empty() ? json(nullptr) : json(r.content)}};
    if (!r.calls.empty()) {
      choice["message"]["tool_calls"] = tool_calls_json(r.calls, false);
      choice["finish_reason"] = "tool_calls";
    }
  } else if (chat_) {
    choice["message"] = {{"role", "assistant"}, {"content", o.text}};
  } else {
    choice["text"] = echo_ + o.text;
  }
  const json body = {{"id", id_},
                     {"object", chat_ ? "chat.completion" : "text_completion"},
                     {"created", created_},
                     {"model", model_},
                     {"choices", json::array({choice})},
                     {"usage", usage(o)}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ResponseWriter::chunk(const std::string& text, const char* finish_reason, bool role,
                                  const std::vector<TokenLogprob>* logprobs) const {
  json choice = {{"index", 0},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)},
                 {"logprobs", logprobs ? logprobs_json(*logprobs) : json(nullptr)}};
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
  if (chat_) return chunk("", nullptr, true);
  return echo_.empty() ? std::string() : chunk(echo_, nullptr, false);
}
std::string ResponseWriter::text_event(const std::string& text, const std::vector<TokenLogprob>& logprobs) const {
  if (!tools_) return chunk(text, nullptr, false, tokenizer_ ? &logprobs : nullptr);
  tool_text_ += text;
  // Only the part not sent yet can hold the first marker (scanning from there
  // keeps a long reply linear).
  const size_t held = std::min(tool_streamed_, tool_text_.size());
  const size_t ready = held + content_before_tool_calls(tool_text_.substr(held));
  std::string now;
  if (ready > tool_streamed_) now = tool_text_.substr(tool_streamed_, ready - tool_streamed_), tool_streamed_ = ready;
  if (now.empty() && (logprobs.empty() || !tokenizer_)) return "";
  return chunk(now, nullptr, false, tokenizer_ ? &logprobs : nullptr);
}

std::string ResponseWriter::finish_event(const std::string& reason) const {
  if (!tools_) return chunk("", reason.c_str(), false);
  const ToolCallReply r = parse_tool_calls(tool_text_);
  std::string events;
  // What was held back and is not a call (a marker that never became one).
  if (r.content.size() > tool_streamed_) events += chunk(r.content.substr(tool_streamed_), nullptr, false);
  if (r.calls.empty()) return events + chunk("", reason.c_str(), false);
  json choice = {{"index", 0}, {"finish_reason", nullptr}, {"logprobs", nullptr},
                 {"delta", {{"tool_calls", tool_calls_json(r.calls, true)}}}};
  events += event({{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_}, {"model", model_},
                   {"choices", json::array({choice})}});
  return events + chunk("", "tool_calls", false);
}

std::string ResponseWriter::usage_event(const GenerationOutcome& o) const {
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
