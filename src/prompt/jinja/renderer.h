// Walks a parsed template with a context and produces its text: scopes (a
// for loop's and a macro's variables stay inside them, namespaces carry
// values out), loops with `loop.*`, macros, globals (namespace, range,
// raise_exception, dict, strftime_now) and the Limits.
#pragma once

#include <string>

#include "prompt/jinja/ast.h"
#include "prompt/jinja/limits.h"

namespace splitdec::jinja {

// Throws TemplateError naming the line of the failing construct.
std::string render(const Body& body, const Dict& context, const Limits& limits);

}  // namespace splitdec::jinja
