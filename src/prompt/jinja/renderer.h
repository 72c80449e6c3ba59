// Walks a parsed template with a context and produces its text: scopes (a
// for loop's and a macro's variables stay inside them, namespaces carry
// values out), loops with `loop.*`, macros, globals (namespace, range,
// raise_exception, dict, strftime_now) and the Limits.
#pragma once

#include <string>

#include "prompt/jinja/ast.h"
#include "prompt/jinja/render_budget.h"

namespace splitdec::jinja {

// Throws TemplateError naming the line of the failing construct; charges
// `budget`, which must be the thread's current one.
std::string render(const Body& body, const Dict& context, RenderBudget& budget);

}  // namespace splitdec::jinja
