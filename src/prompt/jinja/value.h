// A template value, with Python's meaning as transformers' Jinja gives it:
// undefined (falsy, renders empty), none, bool, int, float, str, list,
// dict (insertion-ordered, as HF passes messages), namespace (the one
// mutable kind) and callables (macros, globals such as raise_exception).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace splitdec::jinja {

class Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double f);
  static Value string(std::string s);
  static Value list(List items);
  static Value dict(Dict d);
  static Value name_space(Dict d);
  static Value function(Function f);
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::Int ? static_cast<double>(i_) : f_; }
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_dict() const { return *dict_; }  // namespaces are shared and mutable
  const Function& as_function() const { return *fn_; }

  // Lists and dicts inside each other (0 for a scalar); at most
  // Limits::max_value_depth when built, as the factories refuse more. A
  // namespace may gain deeper attributes later, but namespaces hold no
  // namespaces, so a value's true depth stays under twice the limit.
  int depth() const { return depth_; }
  bool holds_namespace() const { return holds_namespace_; }  // a namespace is inside (cycles need one)

  bool truthy() const;
  std::string str() const;   // Python str(): what {{ x }} prints
  std::string repr() const;  // Python repr(): how a value prints inside a list or dict
  std::string to_json(int64_t indent, bool sort_keys) const;  // the tojson filter
  const char* type_name() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  void append_repr(std::string& out) const;
  void append_json(std::string& out, int64_t indent, bool sort_keys, int64_t depth) const;
  void take_nesting_of(const Value& item);

  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool holds_namespace_ = false;
  int depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`; undefined when absent.
  const Value& get(size_t index, const std::string& name) const;
  const Value& named(const std::string& name) const { return get(static_cast<size_t>(-1), name); }
};

// Python's ordering for sort/dictsort/min/max and < > <= >=; throws
// EvalFailure for values Python would not compare.
bool less_than(const Value& a, const Value& b);

// Python float repr: shortest round trip, ".0" on whole numbers.
std::string float_repr(double f);

}  // namespace splitdec::jinja
