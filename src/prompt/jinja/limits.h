// The bounds a template parse and render keep, so that a hostile template
// (chat templates ship inside downloaded checkpoints) fails with a
// TemplateError naming the limit instead of exhausting the stack, memory or
// time. Real chat templates are small (Gemma-4's: nesting under 15, chains
// under 10 links, some thousand steps a turn), so every value is generous.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitdec::jinja {

struct Limits {
  // Statement and bracket nesting while parsing (the parser recurses once per
  // level), and macro calls in progress (each renders a body of its own).
  int max_depth = 64;
  // An expression tree's height, each link of a chain counted: `1+1+...`
  // and `x|f|f|...` parse in a loop but evaluate (and free) by recursion.
  int max_expression_depth = 256;
  // Expressions and statements being evaluated at once, macro bodies
  // included: bounds the renderer's stack (~1-2 KiB a level in a Debug+ASan
  // build) well inside a thread's 8 MiB.
  int max_render_depth = 1024;
  // Lists and dicts nested inside each other: printing, tojson, comparing
  // and freeing a value recurse once per level.
  int max_value_depth = 128;
  // Work of one render: expressions evaluated, statements run, loop
  // iterations, values compared, copied or printed, and 16 bytes of string
  // scanned, one step each. A few million run in about a second.
  int64_t max_steps = 5'000'000;
  // All loop iterations of one render, and range() sizes.
  int64_t max_loop_iterations = 1'000'000;
  // The rendered text, and any one string built (checked before building).
  size_t max_output_bytes = 16u << 20;
  // Any one list built, checked before building: a value is ~90 bytes, and
  // chat templates list messages, parts and tools, not 100,000 of anything.
  size_t max_list_items = 100'000;
  // Every string and list one render builds, together (strings by their
  // bytes, lists by their items' size): bounds memory where each value alone
  // is within its limit but a loop keeps building more.
  size_t max_built_bytes = 256u << 20;
};

}  // namespace splitdec::jinja
