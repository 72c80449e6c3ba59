#include "prompt/jinja/methods.h"

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/render_budget.h"
#include "prompt/jinja/string_ops.h"

namespace splitdec::jinja {
namespace {

std::optional<std::string> optional_string(const Value& v, const std::string& method) {
  if (v.is_undefined() || v.is(Value::Kind::None)) return std::nullopt;
  if (!v.is(Value::Kind::String)) throw EvalFailure{method + "() takes a string argument, not a '" + v.type_name() + "'"};
  return v.as_string();
}

const std::string& string_arg(const Value& v, const std::string& method) {
  if (!v.is(Value::Kind::String)) throw EvalFailure{method + "() takes a string argument, not a '" + v.type_name() + "'"};
  return v.as_string();
}

int64_t int_arg(const Value& v, int64_t fallback) { return v.is(Value::Kind::Int) ? v.as_int() : fallback; }

// startswith/endswith take a string or a tuple of strings.
bool affix_matches(const std::string& s, const Value& affix, bool prefix, const std::string& method) {
  if (affix.is(Value::Kind::List)) {
    for (const Value& a : affix.as_list())
      if (affix_matches(s, a, prefix, method)) return true;
    return false;
  }
  const std::string& a = string_arg(affix, method);
  if (a.size() > s.size()) return false;
  return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

std::optional<Value> string_method(const std::string& s, const std::string& name, const CallArgs& args) {
  const Value& a0 = args.get(0, "");
  if (name == "startswith" || name == "endswith")
    return Value::boolean(affix_matches(s, args.get(0, name == "startswith" ? "prefix" : "suffix"), name == "startswith", name));
  if (name == "strip") return Value::string(py_strip(s, optional_string(args.get(0, "chars"), name), true, true));
  if (name == "lstrip") return Value::string(py_strip(s, optional_string(args.get(0, "chars"), name), true, false));
  if (name == "rstrip") return Value::string(py_strip(s, optional_string(args.get(0, "chars"), name), false, true));
  if (name == "split") {
    const auto sep = optional_string(args.get(0, "sep"), name);
    if (sep && sep->empty()) throw EvalFailure{"split(): empty separator"};
    List parts;
    for (auto& p : py_split(s, sep, int_arg(args.get(1, "maxsplit"), -1))) parts.push_back(Value::string(std::move(p)));
    return Value::list(std::move(parts));
  }
  if (name == "upper") return Value::string(to_upper(s));
  if (name == "lower") return Value::string(to_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "replace")
    return Value::string(py_replace(s, string_arg(a0, name), string_arg(args.get(1, ""), name), int_arg(args.get(2, "count"), -1)));
  if (name == "find" || name == "count") charge_scan(s.size());
  if (name == "find") {
    const size_t at = s.find(string_arg(a0, name));
    return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(s.substr(0, at))));
  }
  if (name == "count") {
    const std::string& sub = string_arg(a0, name);
    if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    if (!a0.is(Value::Kind::List)) throw EvalFailure{"join() takes a list"};
    std::string out;
    charge_items(a0.as_list().size());
    for (size_t k = 0; k < a0.as_list().size(); ++k) {
      const std::string& item = string_arg(a0.as_list()[k], name);
      check_string_bytes(out.size() + (k ? s.size() : 0) + item.size());
      if (k) out += s;
      out += item;
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    List lines;
    for (auto& line : py_split(py_replace(s, "\r\n", "\n"), std::string("\n"))) lines.push_back(Value::string(std::move(line)));
    if (!lines.empty() && lines.back().as_string().empty()) lines.pop_back();
    return Value::list(std::move(lines));
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Dict& d, const std::string& name, const CallArgs& args) {
  if (name == "get") {
    const Value& key = args.get(0, "key");
    const Value* found = key.is(Value::Kind::String) ? d.find(key.as_string()) : nullptr;
    if (found) return *found;
    const Value& fallback = args.get(1, "default");
    return fallback.is_undefined() ? Value::none() : fallback;  // Python's dict.get defaults to None
  }
  if (name == "items") return dict_items(d);
  if (name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : d.entries) out.push_back(name == "keys" ? Value::string(k) : v);
    return Value::list(std::move(out));
  }
  return std::nullopt;
}

}  // namespace

Value dict_items(const Dict& d) {
  List out;
  for (const auto& [k, v] : d.entries) out.push_back(Value::list({Value::string(k), v}));
  return Value::list(std::move(out));
}

std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& args) {
  if (obj.is(Value::Kind::String)) return string_method(obj.as_string(), name, args);
  if (obj.is(Value::Kind::Dict)) return dict_method(obj.as_dict(), name, args);
  return std::nullopt;
}

}  // namespace splitdec::jinja
