#include "prompt/jinja/lexer.h"

#include <cctype>

#include "prompt/jinja/template_error.h"

namespace splitdec::jinja {
namespace {

[[noreturn]] void syntax_error(int line, const std::string& what) {
  throw TemplateError("chat template line " + std::to_string(line) + ": syntax error: " + what);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_tag_open(pos_);
      add_text(src_.substr(pos_, open - pos_), open);
      if (open == src_.size()) break;
      pos_ = open;
      const char kind = src_[pos_ + 1];
      if (kind == '#') comment();
      else tag(kind == '{' ? Token::Kind::VarBegin : Token::Kind::BlockBegin);
    }
    tokens_.push_back({Token::Kind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_open(size_t from) const {
    for (size_t k = from; k + 1 < src_.size(); ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return src_.size();
  }

  // Text up to a tag at `tag_at` (or the end), with the trims that apply.
  void add_text(std::string_view text, size_t tag_at) {
    const int text_line = line_;
    for (char c : text) line_ += c == '\n';
    std::string t(text);
    if (strip_next_text_) {
      size_t k = 0;
      while (k < t.size() && is_space(t[k])) ++k;
      t.erase(0, k);
    } else if (trim_next_newline_) {
      if (t.rfind("\r\n", 0) == 0) t.erase(0, 2);
      else if (!t.empty() && t[0] == '\n') t.erase(0, 1);
    }
    strip_next_text_ = trim_next_newline_ = false;
    if (tag_at < src_.size()) {
      const char kind = src_[tag_at + 1];
      const char mark = tag_at + 2 < src_.size() ? src_[tag_at + 2] : '\0';
      if (mark == '-') {
        while (!t.empty() && is_space(t.back())) t.pop_back();
      } else if ((kind == '%' || kind == '#') && mark != '+') {
        // lstrip_blocks: only when the tag starts its line in the source.
        size_t j = tag_at;
        while (j > 0 && (src_[j - 1] == ' ' || src_[j - 1] == '\t')) --j;
        const bool line_start = j == 0 || src_[j - 1] == '\n';
        size_t k = t.size();
        while (k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t')) --k;
        if (line_start) t.erase(k);
      }
    }
    if (!t.empty()) tokens_.push_back({Token::Kind::Text, std::move(t), text_line});
  }

  void comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_ + 2);
    if (end == std::string_view::npos) syntax_error(start_line, "comment '{#' is never closed with '#}'");
    for (size_t k = pos_; k < end; ++k) line_ += src_[k] == '\n';
    strip_next_text_ = src_[end - 1] == '-' && end - 1 >= pos_ + 2;
    trim_next_newline_ = !strip_next_text_;
    pos_ = end + 2;
  }

  void tag(Token::Kind begin) {
    const bool is_var = begin == Token::Kind::VarBegin;
    tokens_.push_back({begin, "", line_});
    pos_ += 2;
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    int depth = 0;  // brackets inside the tag: a dict literal's '}' is not the tag's end
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size())
        syntax_error(tokens_.back().line, is_var ? "'{{' is never closed with '}}'" : "'{%' is never closed with '%}'");
      const std::string_view rest = src_.substr(pos_);
      const std::string_view close = is_var ? "}}" : "%}";
      if (depth == 0) {
        const bool dash = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
        if (dash || rest.substr(0, 2) == close) {
          tokens_.push_back({is_var ? Token::Kind::VarEnd : Token::Kind::BlockEnd, "", line_});
          pos_ += dash ? 3 : 2;
          strip_next_text_ = dash;
          trim_next_newline_ = !dash && !is_var;
          return;
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        tokens_.push_back({Token::Kind::Name, std::string(rest.substr(0, n)), line_});
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number(rest);
      } else if (c == '\'' || c == '"') {
        string_literal(rest);
      } else {
        static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : two)
          if (rest.substr(0, 2) == t) op = t;
        if (op.size() == 1 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
          syntax_error(line_, std::string("unexpected character '") + c + "'");
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        tokens_.push_back({Token::Kind::Op, op, line_});
        pos_ += op.size();
      }
    }
  }

  void number(std::string_view rest) {
    size_t n = 0;
    while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
    bool is_float = false;
    if (n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
      is_float = true;
      ++n;
      while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
    }
    if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
        is_float = true;
        n = m;
        while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
      }
    }
    std::string digits;
    for (char ch : rest.substr(0, n))
      if (ch != '_') digits += ch;
    tokens_.push_back({is_float ? Token::Kind::Float : Token::Kind::Int, digits, line_});
    pos_ += n;
  }

  void string_literal(std::string_view rest) {
    const char quote = rest[0];
    const int start_line = line_;
    std::string value;
    size_t k = 1;
    for (;; ++k) {
      if (k >= rest.size()) syntax_error(start_line, "string literal is never closed");
      const char c = rest[k];
      if (c == quote) break;
      line_ += c == '\n';
      if (c != '\\' || k + 1 >= rest.size()) {
        value += c;
        continue;
      }
      const char e = rest[++k];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': line_ += 1; break;  // a backslash-newline continues the line
        default: value += '\\', value += e;
      }
    }
    tokens_.push_back({Token::Kind::String, std::move(value), start_line});
    pos_ += k + 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool strip_next_text_ = false;
  bool trim_next_newline_ = false;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace splitdec::jinja
