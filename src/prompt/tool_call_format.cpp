#include "prompt/tool_call_format.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

namespace splitdec {

using nlohmann::json;

namespace {

constexpr const char* kQuote = "<|\"|>";
constexpr size_t kQuoteSize = 5;
constexpr const char* kToolCallClose = "<tool_call|>";
constexpr int kMaxDepth = 64;  // nesting of maps and lists in one call

class ArgumentParser {
 public:
  explicit ArgumentParser(const std::string& s, size_t at) : s_(s), at_(at) {}
  size_t at() const { return at_; }

  std::optional<json> value(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_space();
    if (s_.compare(at_, kQuoteSize, kQuote) == 0) {
      const size_t end = s_.find(kQuote, at_ + kQuoteSize);
      if (end == std::string::npos) return std::nullopt;
      json v = s_.substr(at_ + kQuoteSize, end - at_ - kQuoteSize);
      at_ = end + kQuoteSize;
      return v;
    }
    if (at_ < s_.size() && s_[at_] == '{') return map(depth);
    if (at_ < s_.size() && s_[at_] == '[') return list(depth);
    // A bare word: up to the next separator.
    const size_t end = s_.find_first_of(",}]", at_);
    if (end == std::string::npos) return std::nullopt;
    std::string word = s_.substr(at_, end - at_);
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.pop_back();
    at_ = end;
    if (word == "true") return json(true);
    if (word == "false") return json(false);
    if (word == "null" || word == "None" || word.empty()) return json(nullptr);
    const json number = json::parse(word, nullptr, false);
    if (!number.is_discarded() && number.is_number()) return number;
    return json(word);
  }

  // {key:value,...} at `at_`.
  std::optional<json> map(int depth) {
    json out = json::object();
    const bool ok = sequence('}', [&] {
      skip_space();
      std::string key;
      if (s_.compare(at_, kQuoteSize, kQuote) == 0) {  // a key as format_argument quotes it by default
        const size_t end = s_.find(kQuote, at_ + kQuoteSize);
        if (end == std::string::npos) return false;
        key = s_.substr(at_ + kQuoteSize, end - at_ - kQuoteSize);
        at_ = end + kQuoteSize;
        skip_space();
        if (at_ >= s_.size() || s_[at_] != ':') return false;
      } else {
        const size_t colon = s_.find(':', at_);
        if (colon == std::string::npos) return false;
        key = s_.substr(at_, colon - at_);
        while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
        if (key.empty() || key.find_first_of("{}[],") != std::string::npos) return false;
        at_ = colon;
      }
      ++at_;  // ':'
      std::optional<json> v = value(depth + 1);
      if (!v) return false;
      out[key] = std::move(*v);
      return true;
    });
    return ok ? std::optional<json>(std::move(out)) : std::nullopt;
  }

  // [a,b,...] at `at_`.
  std::optional<json> list(int depth) {
    json out = json::array();
    const bool ok = sequence(']', [&] {
      std::optional<json> v = value(depth + 1);
      if (v) out.push_back(std::move(*v));
      return v.has_value();
    });
    return ok ? std::optional<json>(std::move(out)) : std::nullopt;
  }

 private:
  // The opening bracket at `at_`, then items that `item` reads, separated by
  // ',', up to `close`; false on anything else.
  template <class Item>
  bool sequence(char close, Item item) {
    ++at_;
    skip_space();
    if (at_ < s_.size() && s_[at_] == close) return ++at_, true;
    for (;;) {
      if (!item()) return false;
      skip_space();
      if (at_ >= s_.size()) return false;
      if (s_[at_] == ',') {
        ++at_;
        continue;
      }
      if (s_[at_] == close) return ++at_, true;
      return false;
    }
  }
  void skip_space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  const std::string& s_;
  size_t at_;
};

// The call that starts at `open` (at kToolCallOpen); its end, or npos.
size_t parse_call(const std::string& text, size_t open, ToolCall* call) {
  const size_t name_at = open + std::char_traits<char>::length(kToolCallOpen);
  const size_t brace = text.find('{', name_at);
  if (brace == std::string::npos) return std::string::npos;
  call->name = text.substr(name_at, brace - name_at);
  // OpenAI's function names: letters, digits, '_', '-' (and '.' as some tools use), 1 to 64.
  if (call->name.empty() || call->name.size() > 64 ||
      call->name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != std::string::npos)
    return std::string::npos;
  ArgumentParser p(text, brace);
  std::optional<json> args = p.map(0);
  if (!args) return std::string::npos;
  if (text.compare(p.at(), std::char_traits<char>::length(kToolCallClose), kToolCallClose) != 0) return std::string::npos;
  call->arguments = std::move(*args);
  return p.at() + std::char_traits<char>::length(kToolCallClose);
}

}  // namespace

ToolCallReply parse_tool_calls(const std::string& text) {
  ToolCallReply r;
  size_t from = 0;
  for (size_t open = text.find(kToolCallOpen); open != std::string::npos; open = text.find(kToolCallOpen, from)) {
    ToolCall call;
    const size_t end = parse_call(text, open, &call);
    if (end == std::string::npos) break;  // the rest stays content, as written
    r.content += text.substr(from, open - from);
    r.calls.push_back(std::move(call));
    from = end;
  }
  r.content += text.substr(from);
  return r;
}

size_t content_before_tool_calls(const std::string& text) {
  const std::string open = kToolCallOpen;
  const size_t at = text.find(open);
  if (at != std::string::npos) return at;
  // A marker that may be arriving: hold back the longest tail that starts it.
  for (size_t keep = std::min(open.size() - 1, text.size()); keep > 0; --keep)
    if (text.compare(text.size() - keep, keep, open, 0, keep) == 0) return text.size() - keep;
  return text.size();
}

std::string format_tool_argument(const json& v) {
  if (v.is_string()) return std::string(kQuote) + v.get<std::string>() + kQuote;
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : v.items()) {  // nlohmann's object is sorted: dictsort's order
      if (!first) out += ',';
      first = false;
      out += key + ":" + format_tool_argument(value);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + format_tool_argument(v[i]);
    return out + "]";
  }
  if (v.is_null()) return "None";
  return v.dump();
}

}  // namespace splitdec
