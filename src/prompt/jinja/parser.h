// Tokens -> statements. Follows Jinja's grammar and operator precedence
// (ternary < or < and < not < comparisons < + - < ~ < * / // % < ** <
// unary, then postfix, filters and tests). Throws TemplateError naming the
// construct and line; nesting deeper than limits.max_depth and expression
// trees higher than limits.max_expression_depth are refused, so that a
// hostile template cannot exhaust the stack (here, or when rendered or freed).
#pragma once

#include <vector>

#include "prompt/jinja/ast.h"
#include "prompt/jinja/lexer.h"
#include "prompt/jinja/limits.h"

namespace splitdec::jinja {

Body parse(const std::vector<Token>& tokens, const Limits& limits);

}  // namespace splitdec::jinja
