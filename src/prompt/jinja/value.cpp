#include "prompt/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "prompt/jinja/eval_failure.h"

namespace splitdec::jinja {
namespace {

template <class Json>
Value from_json_impl(const Json& j) {
  using T = nlohmann::detail::value_t;
  switch (j.type()) {
    case T::boolean: return Value::boolean(j.template get<bool>());
    case T::number_integer: return Value::integer(j.template get<int64_t>());
    case T::number_unsigned: return Value::integer(static_cast<int64_t>(j.template get<uint64_t>()));
    case T::number_float: return Value::real(j.template get<double>());
    case T::string: return Value::string(j.template get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_impl(item));
      return Value::list(std::move(items));
    }
    case T::object: {
      Dict d;
      for (const auto& [key, item] : j.items()) d.entries.emplace_back(key, from_json_impl(item));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

std::string py_quote(const std::string& s) {
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
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
  return out + quote;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
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
  return out + "\"";
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
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::name_space(Dict d) {
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
Value Value::from_json(const nlohmann::json& j) { return from_json_impl(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }

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
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return float_repr(f_);
    case Kind::String: return py_quote(*s_);
    case Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < list_->size(); ++k) out += (k ? ", " : "") + (*list_)[k].repr();
      return out + "]";
    }
    case Kind::Dict:
    case Kind::Namespace: {
      std::string out = kind_ == Kind::Namespace ? "<Namespace {" : "{";
      for (size_t k = 0; k < dict_->entries.size(); ++k)
        out += (k ? ", " : "") + py_quote(dict_->entries[k].first) + ": " + dict_->entries[k].second.repr();
      return out + (kind_ == Kind::Namespace ? "}>" : "}");
    }
    case Kind::Function: return "<function>";
  }
  return "";
}

std::string Value::to_json(int indent, bool sort_keys, int depth) const {
  // Python's json.dumps as transformers' tojson calls it: ", " and ": "
  // without indent, "," and ": " with it; non-ASCII kept as is.
  const std::string pad = indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close_pad = indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string sep = indent > 0 ? "," : ", ";
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return "null";
    case Kind::Bool: return b_ ? "true" : "false";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float:
      if (std::isnan(f_)) return "NaN";
      if (std::isinf(f_)) return f_ > 0 ? "Infinity" : "-Infinity";
      return float_repr(f_);
    case Kind::String: return json_quote(*s_);
    case Kind::List: {
      if (list_->empty()) return "[]";
      std::string out = "[";
      for (size_t k = 0; k < list_->size(); ++k)
        out += (k ? sep : "") + pad + (*list_)[k].to_json(indent, sort_keys, depth + 1);
      return out + close_pad + "]";
    }
    case Kind::Dict:
    case Kind::Namespace: {
      if (dict_->entries.empty()) return "{}";
      auto entries = dict_->entries;
      if (sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "{";
      for (size_t k = 0; k < entries.size(); ++k)
        out += (k ? sep : "") + pad + json_quote(entries[k].first) + ": " +
               entries[k].second.to_json(indent, sort_keys, depth + 1);
      return out + close_pad + "}";
    }
    case Kind::Function: throw EvalFailure{"tojson: a function is not JSON serializable"};
  }
  return "null";
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
  if (numeric(a) && numeric(b)) {
    if (a.is(K::Int) && b.is(K::Int)) return a.as_int() == b.as_int();
    return number_of(a) == number_of(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
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
  if (numeric(a) && numeric(b)) {
    if (a.is(K::Int) && b.is(K::Int)) return a.as_int() < b.as_int();
    return number_of(a) < number_of(b);
  }
  if (a.is(K::String) && b.is(K::String)) return a.as_string() < b.as_string();
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
