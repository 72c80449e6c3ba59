// The parsed template: expressions and statements as the parser builds them
// and the renderer walks them. One node type each, tagged by kind, to keep
// the tree small to write and to read.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "prompt/jinja/value.h"

namespace splitdec::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // literal
    Name,         // name
    ListLit,      // children: items
    DictLit,      // children: key0, value0, key1, value1, ...
    Attr,         // children[0].name
    Subscript,    // children[0][children[1]]
    Slice,        // children[0][children[1]:children[2]:children[3]] (null parts allowed)
    Call,         // children[0](children[1..], kwargs)
    Filter,       // children[0] | name(children[1..], kwargs)
    Test,         // children[0] is [not] name(children[1..])
    Unary,        // name ("not", "-", "+") children[0]
    Binary,       // children[0] name children[1]; name one of + - * / // % ** ~ == != < > <= >= in notin and or
    Conditional,  // children[0] if children[1] else children[2] (null: undefined)
  };
  Kind kind;
  int line;
  std::string name;
  Value literal;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
  int height = 1;  // of the tree under and including this node (Limits::max_expression_depth)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ exprs[0] }}
    If,           // exprs: conditions; bodies: one per condition, then the else body
    For,          // names: targets; exprs: [iterable, filter or null]; bodies: [body, else]
    Set,          // names: targets ("ns" + attr for ns.attr); exprs[0]
    SetBlock,     // names[0] = rendered bodies[0]
    Macro,        // names[0] macro, names[1..] parameters; exprs: defaults (null: none); bodies[0]
    Break,
    Continue,
    FilterBlock,  // exprs[0]: a Filter whose operand is a null placeholder; bodies[0]
  };
  Kind kind;
  int line;
  std::string text;
  std::string attr;  // Set: ns.attr target
  std::vector<std::string> names;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace splitdec::jinja
