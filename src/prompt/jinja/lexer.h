// Template source -> tokens. Text between tags arrives with whitespace
// control already applied: `{%-`/`-%}` (and the {{ }} / {# #} forms) trim
// the neighbouring text, and HF's settings trim_blocks (the newline after a
// block or comment tag goes) and lstrip_blocks (spaces and tabs before a
// block or comment tag at a line's start go). One trailing newline of the
// source is dropped, as Jinja does by default.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace splitdec::jinja {

struct Token {
  enum class Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Kind kind;
  std::string text;  // Text, Name, String (unescaped), Int/Float (digits), Op
  int line;
};

// Throws TemplateError on an unterminated tag, comment or string.
std::vector<Token> tokenize(std::string_view source);

}  // namespace splitdec::jinja
