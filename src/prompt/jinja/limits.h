// The bounds a template render keeps, so that a hostile template fails
// with a named limit instead of exhausting the stack, memory or time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitdec::jinja {

struct Limits {
  int max_depth = 64;                        // syntax nesting, and macro calls in progress
  size_t max_output_bytes = 16u << 20;       // any rendered text, and any string built
  int64_t max_loop_iterations = 1'000'000;   // all loop iterations of one render, and range() sizes
};

}  // namespace splitdec::jinja
