// Tool calls as Gemma-4 writes them in a reply, read back into OpenAI's
// tool_calls. The format is its chat template's (format_argument with
// unquoted keys), the one the model was trained to write:
//   <|tool_call>call:NAME{key:value,...}<tool_call|>
// with values <|"|>text<|"|> (strings, nothing escaped), true / false,
// numbers, {key:value} maps and [a,b] lists. Gemma-3's template has no tool
// support (a tools request to it is refused before this).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace splitdec {

struct ToolCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
};

struct ToolCallReply {
  std::string content;  // the reply's text around the calls
  std::vector<ToolCall> calls;
};

// What opens a call in a reply; a request that must call a tool has this
// (and the function's name and "{", for a named one) forced after its
// generation prompt.
inline constexpr const char* kToolCallOpen = "<|tool_call>call:";
// A tool's own answer would follow a call: the reply stops there (the
// client runs the tool and sends the answer back).
inline constexpr const char* kToolResponseOpen = "<|tool_response>";

// The reply's calls and the text around them; a call that does not parse
// (cut by max_tokens, malformed) stays in the content as written.
ToolCallReply parse_tool_calls(const std::string& text);

// How much of a reply's text so far may be streamed as content now: all of
// it up to the first call marker, or up to a part of a marker at its end.
size_t content_before_tool_calls(const std::string& text);

// A JSON value in the template's argument form (the inverse of the parse,
// as format_argument writes it; maps' keys in sorted order, as dictsort).
std::string format_tool_argument(const nlohmann::json& value);

}  // namespace splitdec
