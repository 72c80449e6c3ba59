// What a filter, method or operator throws when a value breaks its rule; the
// renderer turns it into a TemplateError naming the template line.
#pragma once

#include <string>

namespace splitdec::jinja {

struct EvalFailure {
  std::string message;
};

}  // namespace splitdec::jinja
