#include "prompt/jinja/filters.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/int_math.h"
#include "prompt/jinja/methods.h"
#include "prompt/jinja/render_budget.h"
#include "prompt/jinja/string_ops.h"

namespace splitdec::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void bad_input(const std::string& filter, const Value& v) {
  throw EvalFailure{"filter '" + filter + "' cannot take a '" + std::string(v.type_name()) + "'"};
}

// The items a filter iterates: a list's items, a dict's keys, a string's
// characters; undefined is empty, as in Jinja.
List iterate(const std::string& filter, const Value& v) {
  switch (v.kind()) {
    case K::Undefined: return {};
    case K::List: charge_items(v.as_list().size()); return v.as_list();
    case K::Dict: {
      List keys;
      for (const auto& [k, unused] : v.as_dict().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case K::String: {
      check_list_items(code_point_count(v.as_string()));
      List chars;
      for (char32_t c : utf8_decode(v.as_string())) chars.push_back(Value::string(utf8_encode(std::u32string(1, c))));
      return chars;
    }
    default: bad_input(filter, v);
  }
}

bool flag(const Value& v, bool fallback) { return v.is_undefined() ? fallback : v.truthy(); }

// The rest of a filter's positional arguments, from `first` on (select's test arguments).
CallArgs rest_args(const CallArgs& args, size_t first) {
  CallArgs out;
  for (size_t k = first; k < args.positional.size(); ++k) out.positional.push_back(args.positional[k]);
  return out;
}

Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is(K::String) ? Value::string(to_lower(v.as_string())) : v;
}

// Python's float(s) for a str: surrounding white space, a sign, decimal or
// exponent notation, inf and nan; nullopt where Python raises ValueError.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  const bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.erase(0, 1);
  if (s.empty() || s[0] == '+' || s[0] == '-') return std::nullopt;
  double d = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (end != s.data() + s.size()) return std::nullopt;
  if (error == std::errc::result_out_of_range) d = std::strtod(s.c_str(), nullptr);  // inf or 0, as Python rounds
  else if (error != std::errc()) return std::nullopt;
  return negative ? -d : d;
}

// Jinja's int filter: int(x), else int(float(x)), else the default. Values
// Python would hold as a big int, and infinities, are an error here (int64).
Value to_int(const Value& v, const Value& fallback) {
  switch (v.kind()) {
    case K::Int: return v;
    case K::Bool: return Value::integer(v.as_bool() ? 1 : 0);
    case K::Float:
      if (std::isnan(v.as_double())) return fallback;  // Python's ValueError, which Jinja catches
      return Value::integer(float_to_int(v.as_double(), "filter 'int'"));
    case K::String: {
      std::string s = py_strip(v.as_string(), std::nullopt, true, true);
      const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
      if (s.size() > sign && std::all_of(s.begin() + static_cast<ptrdiff_t>(sign), s.end(), ::isdigit)) {
        int64_t i = 0;
        const char* first = s.data() + (s[0] == '+' ? 1 : 0);
        if (std::from_chars(first, s.data() + s.size(), i).ec != std::errc())
          throw EvalFailure{"filter 'int': " + s.substr(0, 40) + " does not fit in a 64-bit integer"};
        return Value::integer(i);
      }
      const std::optional<double> d = parse_float(s);
      if (!d || std::isnan(*d)) return fallback;
      return Value::integer(float_to_int(*d, "filter 'int'"));
    }
    default: return fallback;
  }
}

Value indent(const std::string& s, const CallArgs& args) {
  const Value& width_arg = args.get(0, "width");
  // Python's ' ' * width: empty when negative; a width past the string cap is refused before building.
  const int64_t width = std::max<int64_t>(0, width_arg.is(K::Int) ? width_arg.as_int() : 4);
  if (!width_arg.is(K::String)) check_string_bytes(static_cast<size_t>(width));
  const std::string pad = width_arg.is(K::String) ? width_arg.as_string() : std::string(static_cast<size_t>(width), ' ');
  const bool first = flag(args.get(1, "first"), false);
  const bool blank = flag(args.get(2, "blank"), false);
  std::vector<std::string> lines = py_split(py_replace(s + "\n", "\r\n", "\n"), std::string("\n"));
  lines.pop_back();  // splitlines() after Jinja's appended newline
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) out += "\n";
    const bool indent_it = (k > 0 || first) && (blank || !lines[k].empty());
    check_string_bytes(out.size() + (indent_it ? pad.size() : 0) + lines[k].size());
    if (indent_it) out += pad;
    out += lines[k];
  }
  return Value::string(out);
}

}  // namespace

Value attribute_of(const Value& item, const std::string& dotted) {
  Value v = item;
  for (const std::string& part : py_split(dotted, std::string("."))) {
    if (v.is_mapping()) {
      const Value* found = v.as_dict().find(part);
      v = found ? *found : Value();
    } else if (v.is(K::List) && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      size_t index = 0;
      const bool fits = std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
      v = fits && index < v.as_list().size() ? v.as_list()[index] : Value();
    } else {
      return Value();
    }
  }
  return v;
}

bool is_known_filter(const std::string& name) {
  static const std::set<std::string> names = {
      "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "first", "float", "indent", "int", "items",
      "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse",
      "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper"};
  return names.count(name) > 0;
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  const Value& a0 = args.get(0, "");
  if (name == "safe") return input;
  if (name == "default" || name == "d") {
    const bool boolean = flag(args.get(1, "boolean"), false);
    const bool use_default = boolean ? !input.truthy() : input.is_undefined();
    return use_default ? (args.get(0, "default_value").is_undefined() ? Value::string("") : args.get(0, "default_value"))
                       : input;
  }
  if (name == "string") return Value::string(input.str());
  if (name == "trim") {
    const Value& chars = args.get(0, "chars");
    return Value::string(py_strip(input.str(), chars.is(K::String) ? std::optional(chars.as_string()) : std::nullopt, true, true));
  }
  if (name == "upper") return Value::string(to_upper(input.str()));
  if (name == "lower") return Value::string(to_lower(input.str()));
  if (name == "capitalize") return Value::string(py_capitalize(input.str()));
  if (name == "title") return Value::string(py_title(input.str()));
  if (name == "replace") {
    const Value& count = args.get(2, "count");
    return Value::string(py_replace(input.str(), args.get(0, "old").str(), args.get(1, "new").str(),
                                    count.is(K::Int) ? count.as_int() : -1));
  }
  if (name == "indent") return indent(input.str(), args);
  if (name == "length" || name == "count") {
    switch (input.kind()) {
      case K::Undefined: return Value::integer(0);
      case K::String: return Value::integer(static_cast<int64_t>(code_point_count(input.as_string())));
      case K::List: return Value::integer(static_cast<int64_t>(input.as_list().size()));
      case K::Dict:
      case K::Namespace: return Value::integer(static_cast<int64_t>(input.as_dict().entries.size()));
      default: bad_input(name, input);
    }
  }
  if (name == "tojson") {
    const Value& indent_arg = args.get(0, "indent");
    return Value::string(input.to_json(indent_arg.is(K::Int) ? indent_arg.as_int() : 0, flag(args.named("sort_keys"), false)));
  }
  if (name == "first" || name == "last") {
    const List items = iterate(name, input);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(name, input));
  if (name == "items") {
    if (input.is_undefined()) return Value::list({});
    if (!input.is_mapping()) bad_input(name, input);
    return dict_items(input.as_dict());
  }
  if (name == "int") return to_int(input, args.get(0, "default").is_undefined() ? Value::integer(0) : args.get(0, "default"));
  if (name == "float") {
    if (input.is_number()) return Value::real(input.as_double());
    if (input.is(K::String))
      if (const std::optional<double> d = parse_float(input.as_string())) return Value::real(*d);
    return args.get(0, "default").is_undefined() ? Value::real(0) : args.get(0, "default");
  }
  if (name == "abs") {
    if (input.is(K::Int)) return Value::integer(int_abs(input.as_int()));
    if (input.is(K::Float)) return Value::real(std::fabs(input.as_double()));
    bad_input(name, input);
  }
  if (name == "round") {
    if (!input.is_number()) bad_input(name, input);
    const double scale = std::pow(10.0, static_cast<double>(a0.is(K::Int) ? a0.as_int() : 0));
    const std::string method = args.get(1, "method").is(K::String) ? args.get(1, "method").as_string() : "common";
    const double x = input.as_double() * scale;
    const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::real(r / scale);
  }
  if (name == "join") {
    const Value& attr = args.get(1, "attribute");
    std::string out;
    bool first = true;
    const std::string separator = args.get(0, "d").str();
    for (const Value& item : iterate(name, input)) {
      const std::string text = (attr.is(K::String) ? attribute_of(item, attr.as_string()) : item).str();
      check_string_bytes(out.size() + (first ? 0 : separator.size()) + text.size());
      if (!first) out += separator;
      out += text;
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (name == "reverse") {
    if (input.is(K::String)) {
      std::u32string s = utf8_decode(input.as_string());
      std::reverse(s.begin(), s.end());
      return Value::string(utf8_encode(s));
    }
    List items = iterate(name, input);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(name, input))
      if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    List items = iterate(name, input);
    const bool reverse = flag(args.get(0, "reverse"), false);
    const bool case_sensitive = flag(args.get(1, "case_sensitive"), false);
    const Value& attr = args.get(2, "attribute");
    auto key = [&](const Value& v) {
      return sort_key(attr.is(K::String) ? attribute_of(v, attr.as_string()) : v, case_sensitive);
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
    });
    return Value::list(std::move(items));
  }
  if (name == "dictsort") {
    if (!input.is_mapping()) bad_input(name, input);
    const bool case_sensitive = flag(args.get(0, "case_sensitive"), false);
    const bool by_value = args.get(1, "by").is(K::String) && args.get(1, "by").as_string() == "value";
    const bool reverse = flag(args.get(2, "reverse"), false);
    List pairs = dict_items(input.as_dict()).as_list();
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      const Value ka = sort_key(a.as_list()[by_value ? 1 : 0], case_sensitive);
      const Value kb = sort_key(b.as_list()[by_value ? 1 : 0], case_sensitive);
      return reverse ? less_than(kb, ka) : less_than(ka, kb);
    });
    return Value::list(std::move(pairs));
  }
  if (name == "sum" || name == "min" || name == "max") {
    const Value& attr = args.get(name == "sum" ? 0 : 1, "attribute");
    List items = iterate(name, input);
    if (attr.is(K::String))
      for (Value& v : items) v = attribute_of(v, attr.as_string());
    if (name == "sum") {
      Value total = args.get(1, "start").is_undefined() ? Value::integer(0) : args.get(1, "start");
      for (const Value& v : items) {
        if (!v.is_number() || !total.is_number()) bad_input(name, v);
        total = total.is(K::Int) && v.is(K::Int) ? Value::integer(int_add(total.as_int(), v.as_int(), "sum"))
                                                 : Value::real(total.as_double() + v.as_double());
      }
      return total;
    }
    if (items.empty()) return Value();
    const bool case_sensitive = flag(args.get(0, "case_sensitive"), false);
    auto less = [&](const Value& a, const Value& b) { return less_than(sort_key(a, case_sensitive), sort_key(b, case_sensitive)); };
    return name == "min" ? *std::min_element(items.begin(), items.end(), less) : *std::max_element(items.begin(), items.end(), less);
  }
  if (name == "attr") return attribute_of(input, a0.str());
  if (name == "map") {
    List out;
    const Value& attr = args.named("attribute");
    for (const Value& item : iterate(name, input)) {
      if (attr.is(K::String)) {
        Value v = attribute_of(item, attr.as_string());
        const Value& fallback = args.named("default");
        out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
      } else if (a0.is(K::String)) {
        if (!is_known_filter(a0.as_string())) throw EvalFailure{"map(): unknown filter '" + a0.as_string() + "'"};
        out.push_back(apply_filter(a0.as_string(), item, rest_args(args, 1)));
      } else {
        throw EvalFailure{"map() needs a filter name or attribute="};
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_when = name == "select" || name == "selectattr";
    const size_t test_at = by_attr ? 1 : 0;
    const Value& test = args.get(test_at, "");
    if (!test.is_undefined() && !test.is(K::String)) throw EvalFailure{name + "(): the test must be a name"};
    if (test.is(K::String) && !is_known_test(test.as_string())) throw EvalFailure{name + "(): unknown test '" + test.as_string() + "'"};
    if (by_attr && !a0.is(K::String)) throw EvalFailure{name + "() needs an attribute name"};
    const CallArgs test_args = rest_args(args, test_at + 1);
    List out;
    for (const Value& item : iterate(name, input)) {
      const Value subject = by_attr ? attribute_of(item, a0.as_string()) : item;
      const bool passes = test.is(K::String) ? apply_test(test.as_string(), subject, test_args) : subject.truthy();
      if (passes == keep_when) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  throw EvalFailure{"unknown filter '" + name + "'"};
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> names = {
      "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer", "float",
      "boolean", "true", "false", "odd", "even", "divisibleby", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le",
      "<=", "gt", ">", "ge", ">=", "in", "callable", "lower", "upper", "sameas"};
  return names.count(name) > 0;
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  const Value& a0 = args.get(0, "");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is(K::None);
  if (name == "string") return v.is(K::String);
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable") return v.is(K::String) || v.is(K::List) || v.is_mapping() || v.is_undefined();
  if (name == "sequence") return v.is(K::String) || v.is(K::List) || v.is_mapping();
  if (name == "number") return v.is_number() || v.is(K::Bool);
  if (name == "integer") return v.is(K::Int);
  if (name == "float") return v.is(K::Float);
  if (name == "boolean") return v.is(K::Bool);
  if (name == "true") return v.is(K::Bool) && v.as_bool();
  if (name == "false") return v.is(K::Bool) && !v.as_bool();
  if (name == "callable") return v.is(K::Function);
  if (name == "lower") return v.is(K::String) && to_lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is(K::String) && to_upper(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is(K::Int)) throw EvalFailure{"test '" + name + "' needs an integer, not a '" + v.type_name() + "'"};
    const int64_t by = name == "divisibleby" ? (a0.is(K::Int) ? a0.as_int() : 0) : 2;
    if (by == 0) throw EvalFailure{"test 'divisibleby' needs a non-zero integer"};
    const int64_t rem = int_floor_mod(v.as_int(), by);
    return name == "odd" ? rem != 0 : rem == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return v == a0;
  if (name == "ne" || name == "!=") return !(v == a0);
  if (name == "lt" || name == "<") return less_than(v, a0);
  if (name == "le" || name == "<=") return !less_than(a0, v);
  if (name == "gt" || name == ">") return less_than(a0, v);
  if (name == "ge" || name == ">=") return !less_than(v, a0);
  if (name == "in") {
    if (a0.is(K::String) && v.is(K::String))
      return charge_scan(a0.as_string().size()), a0.as_string().find(v.as_string()) != std::string::npos;
    if (a0.is(K::List)) return std::find(a0.as_list().begin(), a0.as_list().end(), v) != a0.as_list().end();
    if (a0.is_mapping()) return v.is(K::String) && a0.as_dict().find(v.as_string());
    return false;
  }
  throw EvalFailure{"unknown test '" + name + "'"};
}

}  // namespace splitdec::jinja
