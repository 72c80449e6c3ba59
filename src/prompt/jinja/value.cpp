#include "prompt/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/render_budget.h"

namespace splitdec::jinja {
namespace {

// `level`: the containers around j, refused on the way down so that a deep
// context cannot exhaust the stack here.
template <class Json>
Value from_json_impl(const Json& j, int level) {
  using T = nlohmann::detail::value_t;
  if (j.is_structured()) check_value_depth(level + 1);
  switch (j.type()) {
    case T::boolean: return Value::boolean(j.template get<bool>());
    case T::number_integer: return Value::integer(j.template get<int64_t>());
    case T::number_unsigned: {  // past INT64_MAX only a float holds it (Python's int would)
      const uint64_t u = j.template get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u)) : Value::real(static_cast<double>(u));
    }
    case T::number_float: return Value::real(j.template get<double>());
    case T::string: return Value::string(j.template get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_impl(item, level + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      Dict d;
      for (const auto& [key, item] : j.items()) d.entries.emplace_back(key, from_json_impl(item, level + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

void append_py_quoted(std::string& out, const std::string& s) {
  charge_scan(s.size());
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  out += quote;
  for (char c : s) {
    if (c == quote || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else out += c;
  }
  out += quote;
  check_string_bytes(out.size());
}

void append_json_quoted(std::string& out, const std::string& s) {
  charge_scan(s.size());
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  check_string_bytes(out.size());
}

bool numeric(const Value& v) { return v.is_number() || v.is(Value::Kind::Bool); }
double number_of(const Value& v) { return v.is(Value::Kind::Bool) ? (v.as_bool() ? 1 : 0) : v.as_double(); }

}  // namespace

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::real(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  note_string_built(s.size());
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(List items) {
  note_items_built(items.size(), sizeof(Value));
  Value v;
  v.depth_ = 1;
  for (const Value& item : items) v.take_nesting_of(item);
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::dict(Dict d) {
  // Only capped: a dict's size is fixed by the template's source (a literal,
  // keyword arguments, a loop's `loop`) or the context, so the steps that
  // evaluate it pay for it, and only lists and strings can accumulate.
  check_list_items(d.entries.size());
  Value v;
  v.depth_ = 1;
  for (const auto& [key, item] : d.entries) v.take_nesting_of(item);
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::name_space(Dict d) {
  for (const auto& [key, item] : d.entries)
    if (item.is(Kind::Namespace) || item.holds_namespace())
      throw EvalFailure{"a namespace cannot hold a namespace ('" + key + "')"};
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<const Function>(std::move(f));
  return v;
}
// A container is one level deeper than its deepest item.
void Value::take_nesting_of(const Value& item) {
  if (item.depth_ + 1 > depth_) {
    depth_ = item.depth_ + 1;
    check_value_depth(depth_);
  }
  holds_namespace_ = holds_namespace_ || item.holds_namespace_ || item.is(Kind::Namespace);
}

Value Value::from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }
Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->entries.empty();
    default: return true;
  }
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  std::string out;
  append_repr(out);
  return out;
}

// Appends, checking the size as it goes: a value that shares one list many
// times over can print far larger than it is.
void Value::append_repr(std::string& out) const {
  charge_steps(1);
  switch (kind_) {
    case Kind::Undefined: break;
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += b_ ? "True" : "False"; break;
    case Kind::Int: out += std::to_string(i_); break;
    case Kind::Float: out += float_repr(f_); break;
    case Kind::String: append_py_quoted(out, *s_); break;
    case Kind::List:
      out += '[';
      for (size_t k = 0; k < list_->size(); ++k) {
        if (k) out += ", ";
        (*list_)[k].append_repr(out);
      }
      out += ']';
      break;
    case Kind::Dict:
    case Kind::Namespace:
      out += kind_ == Kind::Namespace ? "<Namespace {" : "{";
      for (size_t k = 0; k < dict_->entries.size(); ++k) {
        if (k) out += ", ";
        append_py_quoted(out, dict_->entries[k].first);
        out += ": ";
        dict_->entries[k].second.append_repr(out);
      }
      out += kind_ == Kind::Namespace ? "}>" : "}";
      break;
    case Kind::Function: out += "<function>"; break;
  }
  check_string_bytes(out.size());
}

std::string Value::to_json(int64_t indent, bool sort_keys) const {
  if (indent > 0) check_string_bytes(static_cast<size_t>(indent));  // so indent * level below cannot wrap
  std::string out;
  append_json(out, indent, sort_keys, 0);
  return out;
}

void Value::append_json(std::string& out, int64_t indent, bool sort_keys, int64_t depth) const {
  // Python's json.dumps as transformers' tojson calls it: ", " and ": "
  // without indent, "," and ": " with it; non-ASCII kept as is.
  charge_steps(1);
  auto newline = [&](int64_t level) {
    if (indent <= 0) return;
    check_string_bytes(out.size() + static_cast<size_t>(indent) * static_cast<size_t>(level));  // indent <= the string cap
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  const char* sep = indent > 0 ? "," : ", ";
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: out += "null"; break;
    case Kind::Bool: out += b_ ? "true" : "false"; break;
    case Kind::Int: out += std::to_string(i_); break;
    case Kind::Float:
      if (std::isnan(f_)) out += "NaN";
      else if (std::isinf(f_)) out += f_ > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(f_);
      break;
    case Kind::String: append_json_quoted(out, *s_); break;
    case Kind::List:
      if (list_->empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (size_t k = 0; k < list_->size(); ++k) {
        if (k) out += sep;
        newline(depth + 1);
        (*list_)[k].append_json(out, indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += ']';
      break;
    case Kind::Dict:
    case Kind::Namespace: {
      if (dict_->entries.empty()) {
        out += "{}";
        break;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : dict_->entries) entries.push_back(&entry);
      if (sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += sep;
        newline(depth + 1);
        append_json_quoted(out, entries[k]->first);
        out += ": ";
        entries[k]->second.append_json(out, indent, sort_keys, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
    }
    case Kind::Function: throw EvalFailure{"tojson: a function is not JSON serializable"};
  }
  check_string_bytes(out.size());
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

bool operator==(const Value& a, const Value& b) {
  using K = Value::Kind;
  charge_steps(1);  // `unique` and `in` compare n^2 and n times
  if (numeric(a) && numeric(b)) {
    if (a.is(K::Int) && b.is(K::Int)) return a.as_int() == b.as_int();
    return number_of(a) == number_of(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return charge_scan(a.as_string().size()), a.as_string() == b.as_string();
    case K::List: return a.as_list() == b.as_list();
    case K::Dict: {
      const auto& x = a.as_dict().entries;
      if (x.size() != b.as_dict().entries.size()) return false;
      for (const auto& [key, value] : x) {
        const Value* other = b.as_dict().find(key);
        if (!other || !(*other == value)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.namespace_dict() == &b.namespace_dict();
    case K::Function: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  using K = Value::Kind;
  charge_steps(1);
  if (numeric(a) && numeric(b)) {
    if (a.is(K::Int) && b.is(K::Int)) return a.as_int() < b.as_int();
    return number_of(a) < number_of(b);
  }
  if (a.is(K::String) && b.is(K::String)) return charge_scan(a.as_string().size()), a.as_string() < b.as_string();
  if (a.is(K::List) && b.is(K::List)) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (less_than(x[k], y[k])) return true;
      if (less_than(y[k], x[k])) return false;
    }
    return x.size() < y.size();
  }
  throw EvalFailure{std::string("cannot order a '") + a.type_name() + "' and a '" + b.type_name() + "'"};
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX
  const size_t e_at = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t k = negative ? 1 : 0; k < e_at; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exponent = std::stoi(sci.substr(e_at + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {  // Python's repr switches to exponents outside this
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
      return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

const Value& CallArgs::get(size_t index, const std::string& name) const {
  static const Value undefined;
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return index < positional.size() ? positional[index] : undefined;
}

}  // namespace splitdec::jinja
