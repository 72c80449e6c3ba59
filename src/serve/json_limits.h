// Bounds on a request body's JSON, checked by a pass that builds nothing,
// before the document is parsed into memory: a 57 MB body of nested arrays
// once cost gigabytes as a DOM.
#pragma once

#include <cstddef>
#include <string>

namespace splitdec::serve {

struct JsonLimits {
  int max_depth = 64;            // nesting of arrays and objects
  size_t max_values = 100000;    // scalars, arrays and objects together
};

// Throws ApiError (400, naming the limit) when `body` passes a limit;
// returns quietly for valid JSON within the limits and for invalid JSON
// (the real parse reports that).
void check_json_limits(const std::string& body, const JsonLimits& limits);

}  // namespace splitdec::serve
