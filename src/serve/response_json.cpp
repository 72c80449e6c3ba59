#include "serve/response_json.h"

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>

#include "io/tokenizer.h"

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

std::string ResponseWriter::completion(const GenerationOutcome& o) const {
  json choice = {{"index", 0}, {"finish_reason", o.finish_reason}, {"logprobs", logprobs_json(o.logprobs)}};
  if (chat_) choice["message"] = {{"role", "assistant"}, {"content", o.text}};
  else choice["text"] = echo_ + o.text;
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
  return chunk(text, nullptr, false, tokenizer_ ? &logprobs : nullptr);
}
std::string ResponseWriter::finish_event(const std::string& reason) const { return chunk("", reason.c_str(), false); }

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
