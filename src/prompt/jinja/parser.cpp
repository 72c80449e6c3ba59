#include "prompt/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/filters.h"
#include "prompt/jinja/template_error.h"

namespace splitdec::jinja {
namespace {

using TK = Token::Kind;
using EK = Expr::Kind;
using SK = Stmt::Kind;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TK::Text: return "text";
    case TK::VarBegin: return "'{{'";
    case TK::VarEnd: return "'}}'";
    case TK::BlockBegin: return "'{%'";
    case TK::BlockEnd: return "'%}'";
    case TK::String: return "a string";
    case TK::End: return "the end of the template";
    default: return "'" + t.text + "'";
  }
}

ExprPtr make(EK kind, int line, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  return e;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const Limits& limits)
      : t_(tokens), max_depth_(limits.max_depth), max_expression_depth_(limits.max_expression_depth) {}

  Body parse_template() {
    std::string ended_by;
    return parse_body({}, "", &ended_by);
  }

 private:
  // Counts nesting on the way down; refuses past max_depth.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_depth_)
        p.fail("nesting deeper than the limit of " + std::to_string(p.max_depth_) + " (max_depth)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  [[noreturn]] void fail(const std::string& what, const char* kind = "syntax error: ") const {
    throw TemplateError("chat template line " + std::to_string(peek().line) + ": " + kind + what);
  }

  const Token& peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(p_++, t_.size() - 1)]; }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TK::Op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TK::Name && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) { return is_op(op) ? (++p_, true) : false; }
  bool skip_name(std::string_view name) { return is_name(name) ? (++p_, true) : false; }
  void expect_op(std::string_view op, const std::string& context) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "' " + context + ", found " + describe(peek()));
  }
  std::string expect_name(const std::string& context) {
    if (peek().kind != TK::Name) fail("expected a name " + context + ", found " + describe(peek()));
    return next().text;
  }
  void expect_block_end(const std::string& tag) {
    if (peek().kind != TK::BlockEnd) fail("expected '%}' to close '" + tag + "', found " + describe(peek()));
    ++p_;
  }

  // Statements until one of `ends` ({% end... %} etc.); the ending keyword is
  // consumed and stored in *ended_by, the rest of its tag is the caller's.
  Body parse_body(std::initializer_list<std::string_view> ends, const std::string& opener, std::string* ended_by) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& tok = peek();
      if (tok.kind == TK::End) {
        if (ends.size() == 0) return body;
        fail("'" + opener + "' is never closed with '{% " + std::string(*(ends.end() - 1)) + " %}'");
      }
      if (tok.kind == TK::Text) {
        auto s = stmt(SK::Text, tok.line);
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (tok.kind == TK::VarBegin) {
        ++p_;
        auto s = stmt(SK::Output, tok.line);
        s->exprs.push_back(parse_expression());
        if (peek().kind != TK::VarEnd) fail("expected '}}', found " + describe(peek()));
        ++p_;
        body.push_back(std::move(s));
      } else if (tok.kind == TK::BlockBegin) {
        ++p_;
        const std::string keyword = expect_name("after '{%'");
        for (std::string_view end : ends)
          if (keyword == end) {
            *ended_by = keyword;
            return body;
          }
        parse_statement(keyword, tok.line, body);
      } else {
        fail("unexpected " + describe(tok));
      }
    }
  }

  std::unique_ptr<Stmt> stmt(SK kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  void parse_statement(const std::string& keyword, int line, Body& body) {
    std::string ended_by;
    if (keyword == "if") {
      auto s = stmt(SK::If, line);
      s->exprs.push_back(parse_expression());
      expect_block_end("if");
      for (;;) {
        s->bodies.push_back(parse_body({"elif", "else", "endif"}, "if", &ended_by));
        if (ended_by == "elif") {
          s->exprs.push_back(parse_expression());
          expect_block_end("elif");
          continue;
        }
        expect_block_end(ended_by);
        if (ended_by == "else") {
          s->bodies.push_back(parse_body({"endif"}, "if", &ended_by));
          expect_block_end("endif");
        }
        break;
      }
      body.push_back(std::move(s));
    } else if (keyword == "for") {
      auto s = stmt(SK::For, line);
      do s->names.push_back(expect_name("after 'for'"));
      while (skip_op(","));
      if (!skip_name("in")) fail("expected 'in' in 'for', found " + describe(peek()));
      s->exprs.push_back(parse_expression(false));
      s->exprs.push_back(skip_name("if") ? parse_expression() : nullptr);
      skip_name("recursive");
      expect_block_end("for");
      s->bodies.push_back(parse_body({"else", "endfor"}, "for", &ended_by));
      expect_block_end(ended_by);
      if (ended_by == "else") {
        s->bodies.push_back(parse_body({"endfor"}, "for", &ended_by));
        expect_block_end("endfor");
      } else {
        s->bodies.emplace_back();
      }
      body.push_back(std::move(s));
    } else if (keyword == "set") {
      auto s = stmt(SK::Set, line);
      s->names.push_back(expect_name("after 'set'"));
      if (skip_op(".")) s->attr = expect_name("after '.' in 'set'");
      while (s->attr.empty() && skip_op(",")) s->names.push_back(expect_name("in 'set'"));
      if (skip_op("=")) {
        s->exprs.push_back(parse_expression());
        expect_block_end("set");
      } else {
        if (!s->attr.empty() || s->names.size() != 1) fail("expected '=' in 'set'");
        expect_block_end("set");
        s->kind = SK::SetBlock;
        s->bodies.push_back(parse_body({"endset"}, "set", &ended_by));
        expect_block_end("endset");
      }
      body.push_back(std::move(s));
    } else if (keyword == "macro") {
      auto s = stmt(SK::Macro, line);
      s->names.push_back(expect_name("after 'macro'"));
      expect_op("(", "after the macro name");
      while (!skip_op(")")) {
        if (s->names.size() > 1) expect_op(",", "between macro parameters");
        s->names.push_back(expect_name("as a macro parameter"));
        s->exprs.push_back(skip_op("=") ? parse_expression() : nullptr);
      }
      expect_block_end("macro");
      s->bodies.push_back(parse_body({"endmacro"}, "macro", &ended_by));
      if (peek().kind == TK::Name) ++p_;  // {% endmacro name %}
      expect_block_end("endmacro");
      body.push_back(std::move(s));
    } else if (keyword == "break" || keyword == "continue") {
      expect_block_end(keyword);
      body.push_back(stmt(keyword == "break" ? SK::Break : SK::Continue, line));
    } else if (keyword == "filter") {
      auto s = stmt(SK::FilterBlock, line);
      s->exprs.push_back(parse_filter(nullptr));
      while (skip_op("|")) s->exprs[0] = parse_filter(std::move(s->exprs[0]));
      expect_block_end("filter");
      s->bodies.push_back(parse_body({"endfilter"}, "filter", &ended_by));
      expect_block_end("endfilter");
      body.push_back(std::move(s));
    } else if (keyword == "generation") {
      // transformers' {% generation %} marks assistant text for masks; it renders its body.
      expect_block_end("generation");
      Body inner = parse_body({"endgeneration"}, "generation", &ended_by);
      expect_block_end("endgeneration");
      for (auto& s : inner) body.push_back(std::move(s));
    } else {
      p_ -= 1;
      fail("unknown tag '" + keyword + "'");
    }
  }

  // ---- expressions -------------------------------------------------------

  // Sets e's height from its children, now all attached, and refuses a tree
  // past the limit: chains (`a+b+...`, `x|f|f...`) grow it link by link.
  ExprPtr grown(ExprPtr e) {
    int below = 0;
    for (const auto& c : e->children)
      if (c) below = std::max(below, c->height);
    for (const auto& [name, c] : e->kwargs) below = std::max(below, c->height);
    e->height = below + 1;
    if (e->height > max_expression_depth_)
      fail("an expression nests deeper than the limit of " + std::to_string(max_expression_depth_) +
           " (max_expression_depth)");
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr = true) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto c = make(EK::Conditional, line);
      c->children.push_back(std::move(e));
      c->children.push_back(parse_or());
      c->children.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      e = grown(std::move(c));
    }
    return e;
  }

  ExprPtr binary(std::string op, int line, ExprPtr l, ExprPtr r) {
    auto e = make(EK::Binary, line, std::move(op));
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return grown(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      ExprPtr right = parse_and();
      e = binary("or", line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      ExprPtr right = parse_not();
      e = binary("and", line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_not() {
    if (!is_name("not")) return parse_compare();
    DepthGuard guard(*this);
    auto e = make(EK::Unary, next().line, "not");
    e->children.push_back(parse_not());
    return grown(std::move(e));
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    for (;;) {
      const Token& tok = peek();
      if (tok.kind == TK::Op && (tok.text == "==" || tok.text == "!=" || tok.text == "<" || tok.text == ">" ||
                                 tok.text == "<=" || tok.text == ">=")) {
        ++p_;
        e = binary(tok.text, tok.line, std::move(e), parse_math1());
      } else if (is_name("in")) {
        ++p_;
        e = binary("in", tok.line, std::move(e), parse_math1());
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        e = binary("notin", tok.line, std::move(e), parse_math1());
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& tok = next();
      ExprPtr right = parse_concat();
      e = binary(tok.text, tok.line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      ExprPtr right = parse_math2();
      e = binary("~", line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& tok = next();
      ExprPtr right = parse_pow();
      e = binary(tok.text, tok.line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      const int line = next().line;
      ExprPtr right = parse_unary();
      e = binary("**", line, std::move(e), std::move(right));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& tok = next();
      e = make(EK::Unary, tok.line, tok.text);
      e->children.push_back(parse_unary(false));
      e = grown(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& tok = peek();
    if (tok.kind == TK::Name) {
      ++p_;
      auto e = make(EK::Literal, tok.line);
      if (tok.text == "true" || tok.text == "True") e->literal = Value::boolean(true);
      else if (tok.text == "false" || tok.text == "False") e->literal = Value::boolean(false);
      else if (tok.text == "none" || tok.text == "None") e->literal = Value::none();
      else e = make(EK::Name, tok.line, tok.text);
      return e;
    }
    if (tok.kind == TK::String) {
      std::string s;
      while (peek().kind == TK::String) s += next().text;  // adjacent literals join, as in Python
      auto e = make(EK::Literal, tok.line);
      try {
        e->literal = Value::string(std::move(s));
      } catch (const EvalFailure& f) {  // a literal past max_output_bytes
        fail(f.message, "");
      }
      return e;
    }
    if (tok.kind == TK::Int || tok.kind == TK::Float) {
      ++p_;
      auto e = make(EK::Literal, tok.line);
      try {
        e->literal = tok.kind == TK::Int ? Value::integer(std::stoll(tok.text)) : Value::real(std::stod(tok.text));
      } catch (const std::out_of_range&) {
        fail("number '" + tok.text + "' is out of range");
      }
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(EK::ListLit, tok.line);  // () is an empty tuple
      ExprPtr first = parse_expression();
      if (skip_op(")")) return first;
      auto tuple = make(EK::ListLit, tok.line);
      tuple->children.push_back(std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        tuple->children.push_back(parse_expression());
      }
      expect_op(")", "to close '('");
      return grown(std::move(tuple));
    }
    if (skip_op("[")) {
      auto list = make(EK::ListLit, tok.line);
      while (!skip_op("]")) {
        if (!list->children.empty()) expect_op(",", "between list items");
        if (skip_op("]")) break;
        list->children.push_back(parse_expression());
      }
      return grown(std::move(list));
    }
    if (skip_op("{")) {
      auto dict = make(EK::DictLit, tok.line);
      while (!skip_op("}")) {
        if (!dict->children.empty()) expect_op(",", "between dict items");
        if (skip_op("}")) break;
        dict->children.push_back(parse_expression());
        expect_op(":", "after a dict key");
        dict->children.push_back(parse_expression());
      }
      return grown(std::move(dict));
    }
    fail("unexpected " + describe(tok) + " in an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      const Token& tok = peek();
      if (skip_op(".")) {
        auto attr = make(EK::Attr, tok.line);
        if (peek().kind == TK::Int) attr->name = next().text;  // x.0 reads item 0
        else attr->name = expect_name("after '.'");
        attr->children.push_back(std::move(e));
        e = grown(std::move(attr));
      } else if (skip_op("[")) {
        e = parse_subscript(std::move(e), tok.line);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    for (;;) {
      if (is_op("]")) break;
      if (skip_op(":")) {
        is_slice = true;
        if (++part > 2) fail("a slice has at most three parts");
        continue;
      }
      if (parts[part]) fail("expected ':' or ']' in a subscript, found " + describe(peek()));
      parts[part] = parse_expression();
    }
    expect_op("]", "to close '['");
    if (!is_slice) {
      if (!parts[0]) fail("empty subscript '[]'");
      auto e = make(EK::Subscript, line);
      e->children.push_back(std::move(target));
      e->children.push_back(std::move(parts[0]));
      return grown(std::move(e));
    }
    auto e = make(EK::Slice, line);
    e->children.push_back(std::move(target));
    for (auto& p : parts) e->children.push_back(std::move(p));
    return grown(std::move(e));
  }

  // Arguments of a call, filter or test: positional, then name=value.
  void parse_args(Expr& e) {
    expect_op("(", "before arguments");
    for (bool first = true; !skip_op(")"); first = false) {
      if (!first) {
        expect_op(",", "between arguments");
        if (skip_op(")")) break;
      }
      if (peek().kind == TK::Name && is_op("=", 1)) {
        std::string name = next().text;
        ++p_;
        e.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.children.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = make(EK::Call, peek().line);
    call->children.push_back(std::move(callee));
    parse_args(*call);
    return grown(std::move(call));
  }

  ExprPtr parse_filter(ExprPtr operand) {
    const int line = peek().line;
    auto f = make(EK::Filter, line, expect_name("after '|'"));
    if (!is_known_filter(f->name)) p_ -= 1, fail("unknown filter '" + f->name + "'", "");
    f->children.push_back(std::move(operand));
    if (is_op("(")) parse_args(*f);
    return grown(std::move(f));
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        const int line = next().line;
        auto test = make(EK::Test, line);
        test->negated = skip_name("not");
        test->name = expect_name("after 'is'");
        if (!is_known_test(test->name)) p_ -= 1, fail("unknown test '" + test->name + "'", "");
        test->children.push_back(std::move(e));
        const Token& arg = peek();
        if (is_op("(")) {
          parse_args(*test);
        } else if ((arg.kind == TK::Name || arg.kind == TK::String || arg.kind == TK::Int || arg.kind == TK::Float ||
                    is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and") || is_name("if") || is_name("in") ||
                     is_name("not") || is_name("is"))) {
          test->children.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
        }
        e = grown(std::move(test));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int max_depth_;
  int max_expression_depth_;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const Limits& limits) { return Parser(tokens, limits).parse_template(); }

}  // namespace splitdec::jinja
