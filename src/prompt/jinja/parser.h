// Tokens -> statements. Follows Jinja's grammar and operator precedence
// (ternary < or < and < not < comparisons < + - < ~ < * / // % < ** <
// unary, then postfix, filters and tests). Throws TemplateError naming the
// construct and line; nesting deeper than `max_depth` is refused so that a
// hostile template cannot exhaust the stack.
#pragma once

#include <vector>

#include "prompt/jinja/ast.h"
#include "prompt/jinja/lexer.h"

namespace splitdec::jinja {

Body parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace splitdec::jinja
