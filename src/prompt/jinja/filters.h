// Jinja's filters (`x | name(args)`) and tests (`x is name(args)`) that chat
// templates use, with Jinja's argument names. Both throw EvalFailure for a
// bad argument; the parser refuses unknown names up front, as Jinja does.
#pragma once

#include <string>

#include "prompt/jinja/value.h"

namespace splitdec::jinja {

bool is_known_filter(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);

bool is_known_test(const std::string& name);
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

// An item's attribute as map/selectattr/sort/join read it ("a.b" walks dicts).
Value attribute_of(const Value& item, const std::string& dotted);

}  // namespace splitdec::jinja
