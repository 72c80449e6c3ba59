// Python methods a template calls on values: str (startswith, split,
// strip, ...) and dict (get, items, keys, values).
#pragma once

#include <optional>
#include <string>

#include "prompt/jinja/value.h"

namespace splitdec::jinja {

// obj.name(args); nullopt when obj's type has no such method.
std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& args);

// Items of a dict as [key, value] lists, the shape `for k, v in d.items()` unpacks.
Value dict_items(const Dict& d);

}  // namespace splitdec::jinja
