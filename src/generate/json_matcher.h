// Which byte strings are a prefix of a document a JsonGrammar generates:
// a pushdown matcher fed one byte at a time. A state is the set of parses
// still alive (a stack of frames each); a union of alternatives that start
// alike (anyOf of two objects, number or integer) keeps one stack per
// alternative until a byte tells them apart.
//
// States are values: step() writes the successor into another state, so a
// walk over the vocabulary (json_constraint.h) can branch from one state
// without copying the matcher.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "generate/json_schema.h"

namespace splitdec {

class JsonMatcher {
 public:
  struct Frame {
    enum class Role : uint8_t { Root, Value, Key, MapKey };
    Role role = Role::Value;
    uint8_t phase = 0;
    int32_t node = -1;  // Value: its node; Key / MapKey: the object's node; Root: -1
    int32_t a = 0;      // per kind: items so far, last property written, literal position, characters so far
    int32_t b = 0;      // per kind: whitespace run, key position, escape or UTF-8 progress, first literal left
    int32_t c = 0;      // Literal: one past the last literal left
    friend bool operator==(const Frame&, const Frame&) = default;
    friend auto operator<=>(const Frame&, const Frame&) = default;
  };
  using Stack = std::vector<Frame>;
  struct State {
    std::vector<Stack> stacks;  // empty: no parse is alive
  };
  // Parses kept alive at once; more are dropped (what is generated stays
  // valid, fewer documents can be).
  static constexpr size_t kMaxStacks = 64;

  explicit JsonMatcher(const JsonGrammar& grammar) : g_(&grammar) {}

  // Before the first byte.
  State start() const;
  // `to` becomes what `from` reaches by `byte`; false when nothing does.
  bool step(const State& from, uint8_t byte, State& to) const;
  // Feeds every byte; false (and `state` unchanged) when one is refused.
  bool feed(State& state, std::string_view bytes) const;
  // The bytes so far are a whole document.
  bool can_end(const State& state) const;
  // A whole document that no byte can continue.
  bool finished(const State& state) const;

  // A walk's fast lane: while the one parse alive is inside a string's
  // text, a byte that stays inside changes only the top frame (no stack is
  // copied). in_string: the lane applies to `state`. string_step: 1 when
  // `top` took `c` and is still inside; 2 when `c` would end the string
  // (step() takes it from there); 0 when it is refused.
  bool in_string(const State& state) const;
  int string_step(Frame& top, uint8_t c) const;

 private:
  void feed_stack(Stack s, uint8_t c, std::vector<Stack>& out) const;
  void start_value(Stack s, int node, uint8_t c, std::vector<Stack>& out) const;
  void feed_array(Stack s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const;
  void feed_object(Stack s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const;
  void expand(int node, std::vector<int>& out, int depth) const;
  // Pops a finished frame and moves its container past it.
  void child_done(Stack& s) const;

  const JsonGrammar* g_;
};

}  // namespace splitdec
