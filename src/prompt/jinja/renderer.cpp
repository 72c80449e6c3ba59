#include "prompt/jinja/renderer.h"

#include <cmath>
#include <ctime>
#include <unordered_map>

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/filters.h"
#include "prompt/jinja/int_math.h"
#include "prompt/jinja/methods.h"
#include "prompt/jinja/render_budget.h"
#include "prompt/jinja/string_ops.h"
#include "prompt/jinja/template_error.h"

namespace splitdec::jinja {
namespace {

using K = Value::Kind;
using EK = Expr::Kind;
using SK = Stmt::Kind;

enum class Flow { Normal, Break, Continue };

std::string where(int line) { return "chat template line " + std::to_string(line) + ": "; }

std::string operand_types(const std::string& op, const Value& a, const Value& b) {
  return "'" + op + "' cannot combine a '" + a.type_name() + "' and a '" + b.type_name() + "'";
}

// How many items range(start, stop, step) has, without overflowing on the way.
uint64_t range_length(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 ? start >= stop : start <= stop) return 0;
  const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1;
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
  return span / stride + 1;
}

class Renderer {
 public:
  Renderer(const Dict& context, RenderBudget& budget) : limits_(budget.limits()), budget_(budget) {
    frames_.emplace_back();
    install_globals();
    for (const auto& [name, value] : context.entries) frames_[0][name] = value;
  }

  std::string run(const Body& body) {
    std::string out;
    out_ = &out;
    exec(body);
    return out;
  }

 private:
  using Frame = std::unordered_map<std::string, Value>;

  // ---- variables -----------------------------------------------------------

  Value lookup(const std::string& name) const {
    for (size_t k = frames_.size(); k-- > floor_;) {
      auto it = frames_[k].find(name);
      if (it != frames_[k].end()) return it->second;
    }
    auto it = frames_[0].find(name);
    return it != frames_[0].end() ? it->second : Value();
  }

  void assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  void install_globals() {
    Frame& g = frames_[0];
    g["raise_exception"] = Value::function([](const CallArgs& args) -> Value {
      throw EvalFailure{"the template raised an error: " + args.get(0, "message").str()};
    });
    g["namespace"] = Value::function([](const CallArgs& args) {
      Dict d;
      const Value& init = args.get(0, "");
      if (init.is_mapping()) d = init.as_dict();
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      return Value::name_space(std::move(d));
    });
    g["dict"] = Value::function([](const CallArgs& args) {
      Dict d;
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      return Value::dict(std::move(d));
    });
    g["range"] = Value::function([this](const CallArgs& args) { return range(args); });
    g["strftime_now"] = Value::function([](const CallArgs& args) {
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, args.get(0, "format").str().c_str(), &local);
      return Value::string(std::string(buf, n));
    });
  }

  Value range(const CallArgs& args) {
    for (const Value& a : args.positional)
      if (!a.is(K::Int)) throw EvalFailure{"range() takes integers, not a '" + std::string(a.type_name()) + "'"};
    const size_t n = args.positional.size();
    if (n == 0 || n > 3) throw EvalFailure{"range() takes one to three arguments"};
    const int64_t start = n == 1 ? 0 : args.positional[0].as_int();
    const int64_t stop = n == 1 ? args.positional[0].as_int() : args.positional[1].as_int();
    const int64_t step = n == 3 ? args.positional[2].as_int() : 1;
    if (step == 0) throw EvalFailure{"range() step must not be zero"};
    const uint64_t length = range_length(start, stop, step);  // checked before anything is built
    if (length > static_cast<uint64_t>(limits_.max_loop_iterations))
      throw EvalFailure{"range() is longer than the limit of " + std::to_string(limits_.max_loop_iterations) +
                        " (max_loop_iterations)"};
    check_list_items(length);
    List out;
    out.reserve(length);
    for (uint64_t k = 0; k < length; ++k)  // start + k * step stays between start and stop
      out.push_back(Value::integer(static_cast<int64_t>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(step))));
    return Value::list(std::move(out));
  }

  // ---- output --------------------------------------------------------------

  void emit(const std::string& s) {
    if (out_->size() + s.size() > limits_.max_output_bytes)
      throw EvalFailure{"output grows past the limit of " + std::to_string(limits_.max_output_bytes) +
                        " bytes (max_output_bytes)"};
    *out_ += s;
  }

  // Counts the evaluations in progress (eval and exec recurse into each
  // other, macro bodies included) and charges one step for each.
  struct Nesting {
    Renderer& r;
    explicit Nesting(Renderer& renderer) : r(renderer) {
      if (++r.render_depth_ > r.limits_.max_render_depth) {
        --r.render_depth_;
        throw EvalFailure{"evaluation nests deeper than the limit of " + std::to_string(r.limits_.max_render_depth) +
                          " (max_render_depth)"};
      }
      r.budget_.charge_steps(1);
    }
    ~Nesting() { --r.render_depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
  };

  // Renders `body` into a string of its own (macro bodies, set blocks).
  std::string capture(const Body& body) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
      exec(body);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buffer;
  }

  // ---- statements ----------------------------------------------------------

  Flow exec(const Body& body) {
    for (const auto& s : body) {
      const Flow f = exec(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    try {
      const Nesting nesting(*this);
      return exec_stmt(s);
    } catch (const EvalFailure& f) {
      throw TemplateError(where(s.line) + f.message);
    }
  }

  Flow exec_stmt(const Stmt& s) {
    switch (s.kind) {
      case SK::Text: emit(s.text); return Flow::Normal;
      case SK::Output: emit(eval(*s.exprs[0]).str()); return Flow::Normal;
      case SK::If:
        for (size_t k = 0; k < s.exprs.size(); ++k)
          if (eval(*s.exprs[k]).truthy()) return exec(s.bodies[k]);
        return s.bodies.size() > s.exprs.size() ? exec(s.bodies.back()) : Flow::Normal;
      case SK::For: return exec_for(s);
      case SK::Set: exec_set(s); return Flow::Normal;
      case SK::SetBlock: assign(s.names[0], Value::string(capture(s.bodies[0]))); return Flow::Normal;
      case SK::Macro: assign(s.names[0], make_macro(s)); return Flow::Normal;
      case SK::Break: return Flow::Break;
      case SK::Continue: return Flow::Continue;
      case SK::FilterBlock: {
        block_input_ = Value::string(capture(s.bodies[0]));
        emit(eval(*s.exprs[0]).str());
        return Flow::Normal;
      }
    }
    return Flow::Normal;
  }

  void exec_set(const Stmt& s) {
    Value v = eval(*s.exprs[0]);
    if (!s.attr.empty()) {
      const Value target = lookup(s.names[0]);
      if (!target.is(K::Namespace))
        throw EvalFailure{"'set " + s.names[0] + "." + s.attr + "' needs '" + s.names[0] + "' to be a namespace()"};
      // No namespace inside a namespace (so no cycles), and the namespace stays within the nesting limit.
      if (v.is(K::Namespace) || v.holds_namespace())
        throw EvalFailure{"a namespace cannot hold a namespace ('" + s.names[0] + "." + s.attr + "')"};
      check_value_depth(v.depth() + 1);
      target.namespace_dict().set(s.attr, std::move(v));
      return;
    }
    if (s.names.size() == 1) return assign(s.names[0], std::move(v));
    if (!v.is(K::List) || v.as_list().size() != s.names.size())
      throw EvalFailure{"'set' cannot unpack a '" + std::string(v.type_name()) + "' into " +
                        std::to_string(s.names.size()) + " names"};
    for (size_t k = 0; k < s.names.size(); ++k) assign(s.names[k], v.as_list()[k]);
  }

  void bind_targets(const std::vector<std::string>& names, const Value& item) {
    if (names.size() == 1) return assign(names[0], item);
    if (!item.is(K::List) || item.as_list().size() != names.size())
      throw EvalFailure{"'for' cannot unpack a '" + std::string(item.type_name()) + "' into " +
                        std::to_string(names.size()) + " names"};
    for (size_t k = 0; k < names.size(); ++k) assign(names[k], item.as_list()[k]);
  }

  List loop_items(const Value& iterable) {
    switch (iterable.kind()) {
      case K::Undefined: return {};
      case K::List: charge_items(iterable.as_list().size()); return iterable.as_list();
      case K::String:
      case K::Dict: return apply_filter("list", iterable, {}).as_list();
      default: throw EvalFailure{"'for' cannot iterate over a '" + std::string(iterable.type_name()) + "'"};
    }
  }

  void count_iteration() {
    budget_.charge_steps(1);
    if (++iterations_ > limits_.max_loop_iterations)
      throw EvalFailure{"loops ran more than the limit of " + std::to_string(limits_.max_loop_iterations) +
                        " iterations (max_loop_iterations)"};
  }

  Flow exec_for(const Stmt& s) {
    List items = loop_items(eval(*s.exprs[0]));
    frames_.emplace_back();
    struct PopFrame {
      std::vector<Frame>& frames;
      ~PopFrame() { frames.pop_back(); }
    } pop{frames_};
    if (s.exprs[1]) {  // `for x in xs if cond`: filtered before the loop, so loop.length counts what passes
      List kept;
      for (const Value& item : items) {
        count_iteration();
        bind_targets(s.names, item);
        if (eval(*s.exprs[1]).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_iteration();
      Dict loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(n - i));
      loop.set("revindex0", Value::integer(n - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == n - 1));
      loop.set("length", Value::integer(n));
      loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
      loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value());
      assign("loop", Value::dict(std::move(loop)));
      bind_targets(s.names, items[static_cast<size_t>(i)]);
      if (exec(s.bodies[0]) == Flow::Break) break;
    }
    if (n == 0) return exec(s.bodies[1]);
    return Flow::Normal;
  }

  Value make_macro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::function([this, macro](const CallArgs& args) { return call_macro(*macro, args); });
  }

  Value call_macro(const Stmt& m, const CallArgs& args) {
    const std::string& name = m.names[0];
    const size_t params = m.names.size() - 1;
    if (args.positional.size() > params)
      throw EvalFailure{"macro '" + name + "' takes " + std::to_string(params) + " arguments, got " +
                        std::to_string(args.positional.size())};
    if (depth_ >= limits_.max_depth)
      throw EvalFailure{"macro '" + name + "' nests deeper than the limit of " + std::to_string(limits_.max_depth) +
                        " (max_depth)"};
    for (const auto& [key, unused] : args.keyword) {
      bool known = false;
      for (size_t k = 1; k < m.names.size(); ++k) known |= m.names[k] == key;
      if (!known) throw EvalFailure{"macro '" + name + "' has no parameter '" + key + "'"};
    }
    // The macro sees its parameters and the template's globals, not the caller's locals.
    const size_t saved_floor = floor_;
    frames_.emplace_back();
    floor_ = frames_.size() - 1;
    ++depth_;
    struct Restore {
      Renderer& r;
      size_t floor;
      ~Restore() {
        r.frames_.pop_back();
        r.floor_ = floor;
        --r.depth_;
      }
    } restore{*this, saved_floor};
    for (size_t k = 0; k < params; ++k) {
      const std::string& param = m.names[k + 1];
      Value v = args.get(k, param);
      if (v.is_undefined() && m.exprs[k]) v = eval(*m.exprs[k]);
      assign(param, std::move(v));
    }
    return Value::string(capture(m.bodies[0]));
  }

  // ---- expressions ---------------------------------------------------------

  Value eval(const Expr& e) {
    try {
      const Nesting nesting(*this);
      return eval_node(e);
    } catch (const EvalFailure& f) {
      throw TemplateError(where(e.line) + f.message);
    }
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t k = first; k < e.children.size(); ++k) args.positional.push_back(eval(*e.children[k]));
    for (const auto& [name, value] : e.kwargs) args.keyword.emplace_back(name, eval(*value));
    return args;
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case EK::Literal: return e.literal;
      case EK::Name: return lookup(e.name);
      case EK::ListLit: {
        List items;
        for (const auto& c : e.children) items.push_back(eval(*c));
        return Value::list(std::move(items));
      }
      case EK::DictLit: {
        Dict d;
        for (size_t k = 0; k + 1 < e.children.size(); k += 2) {
          const Value key = eval(*e.children[k]);
          if (!key.is(K::String)) throw EvalFailure{"dict keys must be strings, not '" + std::string(key.type_name()) + "'"};
          d.set(key.as_string(), eval(*e.children[k + 1]));
        }
        return Value::dict(std::move(d));
      }
      case EK::Attr: return attribute_of(eval(*e.children[0]), e.name);
      case EK::Subscript: return subscript(eval(*e.children[0]), eval(*e.children[1]));
      case EK::Slice: return slice(e);
      case EK::Call: return call(e);
      case EK::Filter: {
        const Value input = e.children[0] ? eval(*e.children[0]) : block_input_;
        return apply_filter(e.name, input, eval_args(e, 1));
      }
      case EK::Test: {
        const Value subject = eval(*e.children[0]);
        return Value::boolean(apply_test(e.name, subject, eval_args(e, 1)) != e.negated);
      }
      case EK::Unary: {
        const Value v = eval(*e.children[0]);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.is(K::Int)) return Value::integer(e.name == "-" ? int_neg(v.as_int()) : v.as_int());
        if (v.is(K::Float)) return Value::real(e.name == "-" ? -v.as_double() : v.as_double());
        throw EvalFailure{"unary '" + e.name + "' cannot take a '" + v.type_name() + "'"};
      }
      case EK::Binary: return binary(e);
      case EK::Conditional:
        if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value();
    }
    return Value();
  }

  static Value subscript(const Value& target, const Value& key) {
    if (target.is_mapping()) {
      if (!key.is(K::String)) return Value();
      const Value* found = target.as_dict().find(key.as_string());
      return found ? *found : Value();
    }
    if ((target.is(K::List) || target.is(K::String)) && key.is(K::Int)) {
      if (target.is(K::List)) {
        const auto n = static_cast<int64_t>(target.as_list().size());
        const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
        return i >= 0 && i < n ? target.as_list()[static_cast<size_t>(i)] : Value();
      }
      const std::u32string s = utf8_decode(target.as_string());
      const auto n = static_cast<int64_t>(s.size());
      const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      return i >= 0 && i < n ? Value::string(utf8_encode(s.substr(static_cast<size_t>(i), 1))) : Value();
    }
    return Value();  // as Jinja: a missing item is undefined
  }

  Value slice(const Expr& e) {
    const Value target = eval(*e.children[0]);
    int64_t parts[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.children[static_cast<size_t>(k) + 1]) continue;
      const Value v = eval(*e.children[static_cast<size_t>(k) + 1]);
      if (v.is(K::None)) continue;
      if (!v.is(K::Int)) throw EvalFailure{"slice bounds must be integers, not '" + std::string(v.type_name()) + "'"};
      parts[k] = v.as_int();
      given[k] = true;
    }
    const int64_t step = parts[2];
    if (step == 0) throw EvalFailure{"slice step cannot be zero"};
    const bool is_string = target.is(K::String);
    if (!is_string && !target.is(K::List)) {
      if (target.is_undefined()) return Value();
      throw EvalFailure{"cannot slice a '" + std::string(target.type_name()) + "'"};
    }
    const std::u32string text = is_string ? utf8_decode(target.as_string()) : std::u32string();
    const auto n = static_cast<int64_t>(is_string ? text.size() : target.as_list().size());
    // Python's slice.indices().
    auto clamp = [&](int64_t v, bool is_given, int64_t fallback) {
      if (!is_given) return fallback;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t start = clamp(parts[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(parts[1], given[1], step > 0 ? n : -1);
    // Counted first, so that a huge step cannot overflow `i` (start + k * step stays in [-1, n]).
    const uint64_t count = range_length(start, stop, step);
    charge_items(count);
    std::u32string out_text;
    List out_list;
    for (uint64_t k = 0; k < count; ++k) {
      const auto i = static_cast<size_t>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(step));
      if (is_string) out_text += text[i];
      else out_list.push_back(target.as_list()[i]);
    }
    return is_string ? Value::string(utf8_encode(out_text)) : Value::list(std::move(out_list));
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.children[0];
    if (callee.kind == EK::Attr) {  // a method: obj.name(args)
      const Value obj = eval(*callee.children[0]);
      const CallArgs args = eval_args(e, 1);
      if (auto result = call_method(obj, callee.name, args)) return *result;
      const Value member = attribute_of(obj, callee.name);
      if (member.is(K::Function)) return member.as_function()(args);
      throw EvalFailure{"a '" + std::string(obj.type_name()) + "' has no method '" + callee.name + "'"};
    }
    const Value fn = eval(callee);
    if (!fn.is(K::Function)) {
      const std::string what = callee.kind == EK::Name ? "'" + callee.name + "'" : "a '" + std::string(fn.type_name()) + "'";
      throw EvalFailure{what + (fn.is_undefined() ? " is undefined" : " is not callable")};
    }
    return fn.as_function()(eval_args(e, 1));
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.children[0]);
    if (op == "and") return a.truthy() ? eval(*e.children[1]) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.children[1]);
    const Value b = eval(*e.children[1]);
    if (op == "~") {
      std::string left = a.str();
      const std::string right = b.str();
      check_string_bytes(left.size() + right.size());
      return Value::string(std::move(left) + right);
    }
    if (op == "==") return Value::boolean(a == b);
    if (op == "!=") return Value::boolean(!(a == b));
    if (op == "<") return Value::boolean(less_than(a, b));
    if (op == ">") return Value::boolean(less_than(b, a));
    if (op == "<=") return Value::boolean(!less_than(b, a));
    if (op == ">=") return Value::boolean(!less_than(a, b));
    if (op == "in" || op == "notin") {
      if (!b.is_undefined() && !b.is(K::String) && !b.is(K::List) && !b.is_mapping())
        throw EvalFailure{"'in' cannot search a '" + std::string(b.type_name()) + "'"};
      if (b.is(K::String) && !a.is(K::String))
        throw EvalFailure{"'in <string>' needs a string on the left, not a '" + std::string(a.type_name()) + "'"};
      CallArgs args;
      args.positional.push_back(b);
      return Value::boolean(apply_test("in", a, args) == (op == "in"));
    }
    return arithmetic(op, a, b);
  }

  static Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    const bool ints = a.is(K::Int) && b.is(K::Int);
    const bool nums = (a.is_number() || a.is(K::Bool)) && (b.is_number() || b.is(K::Bool));
    auto num = [](const Value& v) { return v.is(K::Bool) ? (v.as_bool() ? 1.0 : 0.0) : v.as_double(); };
    auto integer = [](const Value& v) { return v.is(K::Bool) ? int64_t{v.as_bool()} : v.as_int(); };
    const bool int_like = nums && !a.is(K::Float) && !b.is(K::Float);
    if (op == "+") {
      if (int_like) return Value::integer(int_add(integer(a), integer(b)));
      if (nums) return Value::real(num(a) + num(b));
      if (a.is(K::String) && b.is(K::String)) {
        check_string_bytes(a.as_string().size() + b.as_string().size());
        return Value::string(a.as_string() + b.as_string());
      }
      if (a.is(K::List) && b.is(K::List)) {
        check_list_items(a.as_list().size() + b.as_list().size());
        List items = a.as_list();
        items.insert(items.end(), b.as_list().begin(), b.as_list().end());
        return Value::list(std::move(items));
      }
    } else if (op == "-") {
      if (int_like) return Value::integer(int_sub(integer(a), integer(b)));
      if (nums) return Value::real(num(a) - num(b));
    } else if (op == "*") {
      if (int_like) return Value::integer(int_mul(integer(a), integer(b)));
      if (nums) return Value::real(num(a) * num(b));
      if ((a.is(K::String) && b.is(K::Int)) || (a.is(K::Int) && b.is(K::String))) {
        const std::string& s = a.is(K::String) ? a.as_string() : b.as_string();
        const int64_t times = std::max<int64_t>(0, a.is(K::Int) ? a.as_int() : b.as_int());
        if (s.empty() || times == 0) return Value::string("");
        // Checked before building; s is not empty, so times passes first and the product cannot wrap.
        check_string_bytes(static_cast<size_t>(times));
        check_string_bytes(s.size() * static_cast<size_t>(times));
        std::string out;
        out.reserve(s.size() * static_cast<size_t>(times));
        for (int64_t k = 0; k < times; ++k) out += s;
        return Value::string(std::move(out));
      }
    } else if (op == "/" || op == "//" || op == "%") {
      if (nums) {
        if (num(b) == 0) throw EvalFailure{"division by zero in '" + op + "'"};
        if (op == "/") return Value::real(num(a) / num(b));
        if (int_like) return Value::integer(op == "//" ? int_floor_div(integer(a), integer(b)) : int_floor_mod(integer(a), integer(b)));
        // Python's float // and %: floored, the remainder takes the divisor's sign.
        const double q = std::floor(num(a) / num(b));
        return Value::real(op == "//" ? q : num(a) - q * num(b));
      }
    } else if (op == "**") {
      if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
      if (nums) return Value::real(std::pow(num(a), num(b)));
    }
    throw EvalFailure{operand_types(op, a, b)};
  }

  const Limits& limits_;
  RenderBudget& budget_;
  std::vector<Frame> frames_;
  size_t floor_ = 1;  // lookups read frames [floor_, top] and then the globals (frame 0)
  std::string* out_ = nullptr;
  Value block_input_;
  int depth_ = 0;         // macro calls in progress
  int render_depth_ = 0;  // evaluations in progress
  int64_t iterations_ = 0;
};

}  // namespace

std::string render(const Body& body, const Dict& context, RenderBudget& budget) {
  return Renderer(context, budget).run(body);
}

}  // namespace splitdec::jinja
