// Every chat template failure (syntax, unknown filter, type error,
// raise_exception, a limit) is one of these: one line naming the construct
// and the template line.
#pragma once

#include "core/error.h"

namespace splitdec::jinja {

struct TemplateError : Error {
  using Error::Error;
};

}  // namespace splitdec::jinja
