#include "generate/json_matcher.h"

#include <algorithm>

namespace splitdec {

using Kind = JsonNode::Kind;
using Role = JsonMatcher::Frame::Role;

namespace {

// Phases of each frame kind.
enum RootPhase : uint8_t { kRootBefore, kRootDone, kRootInValue };
enum ObjectPhase : uint8_t { kObjOpen, kObjAfterOpen, kObjInKey, kObjAfterKey, kObjAfterColon, kObjInValue, kObjAfterValue, kObjAfterComma };
enum ArrayPhase : uint8_t { kArrOpen, kArrAfterOpen, kArrInItem, kArrAfterItem, kArrAfterComma };
enum StringPhase : uint8_t { kStrQuote, kStrBody, kStrEscape, kStrUnicode, kStrUtf8 };
enum NumberPhase : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp };

// Digits per part of a number: beyond these a JavaScript client parses the
// number as Infinity, or an integer as one it cannot hold exactly.
constexpr int32_t kMaxIntDigits = 15, kMaxFracDigits = 15, kMaxExpDigits = 2;


bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool number_accepts_end(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExp;
}

// Number frames: a = digits of the current part. Returns false when `c`
// does not continue the number.
bool number_continues(JsonMatcher::Frame& f, uint8_t c, bool integer) {
  auto digit_into = [&](uint8_t phase, int32_t cap) {
    if (!is_digit(c)) return false;
    const int32_t digits = f.phase == phase ? f.a + 1 : 1;
    if (digits > cap) return false;
    f.phase = phase;
    f.a = digits;
    return true;
  };
  switch (f.phase) {
    case kNumStart:
      if (c == '-') return f.phase = kNumMinus, true;
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return f.phase = kNumZero, f.a = 1, true;
      return c != '0' && digit_into(kNumInt, kMaxIntDigits);
    case kNumInt:
      if (digit_into(kNumInt, kMaxIntDigits)) return true;
      [[fallthrough]];
    case kNumZero:
      if (integer) return false;
      if (c == '.') return f.phase = kNumDot, f.a = 0, true;
      if (c == 'e' || c == 'E') return f.phase = kNumE, f.a = 0, true;
      return false;
    case kNumDot: return digit_into(kNumFrac, kMaxFracDigits);
    case kNumFrac:
      if (digit_into(kNumFrac, kMaxFracDigits)) return true;
      if (c == 'e' || c == 'E') return f.phase = kNumE, f.a = 0, true;
      return false;
    case kNumE:
      if (c == '+' || c == '-') return f.phase = kNumESign, true;
      [[fallthrough]];
    case kNumESign: return digit_into(kNumExp, kMaxExpDigits);
    case kNumExp: return digit_into(kNumExp, kMaxExpDigits);
    default: return false;
  }
}

// String frames: a = characters so far; b = \u digits (and 0x100 after a
// leading D, to refuse surrogates), or UTF-8 bytes still to come with the
// range of the next one. Returns: 1 consumed, 0 refused, 2 closed.
int string_byte(JsonMatcher::Frame& f, uint8_t c, int64_t min_chars, int64_t max_chars) {
  const bool room = max_chars < 0 || f.a < max_chars;
  switch (f.phase) {
    case kStrQuote:
      if (c != '"') return 0;
      f.phase = kStrBody;
      return 1;
    case kStrBody: {
      if (c == '"') return f.a >= min_chars ? 2 : 0;
      if (!room || c < 0x20) return 0;
      if (c == '\\') return f.phase = kStrEscape, 1;
      if (c < 0x80) return ++f.a, 1;
      // UTF-8: the lead byte fixes how many follow and the first one's range
      // (no overlong forms, no surrogates, nothing past U+10FFFF).
      int32_t follow = 0, lo = 0x80, hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) follow = 1;
      else if (c >= 0xE0 && c <= 0xEF) follow = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      else if (c >= 0xF0 && c <= 0xF4) follow = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      else return 0;
      ++f.a;
      f.phase = kStrUtf8;
      f.b = follow | (lo << 8) | (hi << 16);
      return 1;
    }
    case kStrEscape:
      if (c == 'u') return f.phase = kStrUnicode, f.b = 0, 1;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't')
        return ++f.a, f.phase = kStrBody, 1;
      return 0;
    case kStrUnicode: {
      if (!is_hex(c)) return 0;
      const int32_t digits = f.b & 0xFF;
      if (digits == 0 && (c == 'd' || c == 'D')) f.b |= 0x100;
      if (digits == 1 && (f.b & 0x100) && !(c >= '0' && c <= '7')) return 0;  // \uD800-\uDFFF
      f.b = (f.b & ~0xFF) | (digits + 1);
      if (digits + 1 == 4) ++f.a, f.phase = kStrBody, f.b = 0;
      return 1;
    }
    case kStrUtf8: {
      const int32_t lo = (f.b >> 8) & 0xFF, hi = (f.b >> 16) & 0xFF, follow = f.b & 0xFF;
      if (c < lo || c > hi) return 0;
      if (follow == 1) f.phase = kStrBody, f.b = 0;
      else f.b = (follow - 1) | (0x80 << 8) | (0xBF << 16);
      return 1;
    }
    default: return 0;
  }
}

// Whitespace between a container's tokens: one space, or a newline and an
// indentation of spaces and tabs (b: 1 after the space, 2 + indentation
// after the newline). llama.cpp's JSON grammars allow the same, so that a
// model cannot spend its reply on blanks.
bool take_ws(JsonMatcher::Frame& f, uint8_t c) {
  if (f.b == 0) {
    if (c == ' ') return f.b = 1, true;
    if (c == '\n') return f.b = 2, true;
    return false;
  }
  if (f.b >= 2 && (c == ' ' || c == '\t') && f.b - 2 < kMaxIndent) return ++f.b, true;
  return false;
}

}  // namespace

JsonMatcher::State JsonMatcher::start() const {
  Frame root;
  root.role = Role::Root;
  root.phase = kRootBefore;
  return State{{Stack{root}}};
}

void JsonMatcher::expand(int node, std::vector<int>& out, int depth) const {
  const JsonNode& n = g_->nodes[size_t(node)];
  if (n.kind != Kind::Union) {
    if (std::find(out.begin(), out.end(), node) == out.end()) out.push_back(node);
    return;
  }
  if (depth > 2 * kMaxSchemaDepth) return;  // the compiler refuses loops; a bound all the same
  for (int a : n.alternatives) expand(a, out, depth + 1);
}

void JsonMatcher::start_value(Stack s, int node, uint8_t c, std::vector<Stack>& out) const {
  std::vector<int> nodes;
  expand(node, nodes, 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Stack t = i + 1 == nodes.size() ? std::move(s) : s;
    Frame f;
    f.node = nodes[i];
    if (g_->nodes[size_t(f.node)].kind == Kind::Literal) f.c = int32_t(g_->nodes[size_t(f.node)].literals.size());
    t.push_back(f);
    feed_stack(std::move(t), c, out);
  }
}

void JsonMatcher::child_done(Stack& s) const {
  const Frame done = s.back();
  s.pop_back();
  Frame& p = s.back();
  p.b = 0;
  if (p.role == Role::Root) {
    p.phase = kRootDone;
  } else if (g_->nodes[size_t(p.node)].kind == Kind::Array) {
    p.phase = kArrAfterItem;
    ++p.a;
  } else if (p.phase == kObjInKey) {
    p.phase = kObjAfterKey;
    if (done.role == Role::Key) p.a = done.a;  // the property now written
  } else {
    p.phase = kObjAfterValue;
  }
}

void JsonMatcher::feed_stack(Stack s, uint8_t c, std::vector<Stack>& out) const {
  for (;;) {
    Frame& f = s.back();
    if (f.role == Role::Root) {
      if (f.phase != kRootBefore) return;
      f.phase = kRootInValue;
      return start_value(std::move(s), g_->root, c, out);
    }
    const JsonNode& n = g_->nodes[size_t(f.node)];
    if (f.role == Role::Key) {
      const std::string& key = n.properties[size_t(f.a)].key;
      if (uint8_t(key[size_t(f.b)]) != c) return;
      if (size_t(++f.b) == key.size()) child_done(s);
      out.push_back(std::move(s));
      return;
    }
    if (f.role == Role::MapKey) {
      const int r = string_byte(f, c, 0, -1);
      if (r == 0) return;
      if (r == 2) child_done(s);
      out.push_back(std::move(s));
      return;
    }
    switch (n.kind) {
      case Kind::Literal: {
        // Literals [b, c) all go on past position a and share what came
        // before it: sorted, those with byte `c` next form one range.
        const auto& lits = n.literals;
        const size_t pos = size_t(f.a);
        auto at = [&](size_t k) { return uint8_t(lits[k][pos]); };
        size_t lo = size_t(f.b), hi = size_t(f.c);
        while (lo < hi && at(lo) < c) ++lo;
        size_t end = lo;
        while (end < hi && at(end) == c) ++end;
        if (lo == end) return;
        f.a = int32_t(pos + 1);
        f.b = int32_t(lo);
        f.c = int32_t(end);
        if (lits[lo].size() == pos + 1) {  // one literal is whole here (it sorts first); others may go on
          if (end - lo > 1) {
            Stack longer = s;
            ++longer.back().b;
            out.push_back(std::move(longer));
          }
          child_done(s);
        }
        out.push_back(std::move(s));
        return;
      }
      case Kind::String: {
        const int r = string_byte(f, c, n.min_count, n.max_count);
        if (r == 0) return;
        if (r == 2) child_done(s);
        out.push_back(std::move(s));
        return;
      }
      case Kind::Number:
      case Kind::Integer:
        if (number_continues(f, c, n.kind == Kind::Integer)) {
          out.push_back(std::move(s));
          return;
        }
        if (!number_accepts_end(f.phase)) return;
        child_done(s);
        continue;  // the byte belongs to the container
      case Kind::Array: return feed_array(std::move(s), n, c, out);
      case Kind::Object: return feed_object(std::move(s), n, c, out);
      case Kind::Union: return;  // expanded before it is pushed
    }
    return;
  }
}

void JsonMatcher::feed_array(Stack s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const {
  Frame& f = s.back();
  switch (f.phase) {
    case kArrOpen:
      if (c != '[') return;
      f.phase = kArrAfterOpen;
      break;
    case kArrAfterOpen:
    case kArrAfterComma:
      if (take_ws(f, c)) break;
      if (c == ']' && f.phase == kArrAfterOpen) {
        if (n.min_count > 0) return;
        child_done(s);
        break;
      }
      if (n.max_count == 0) return;
      f.phase = kArrInItem;
      f.b = 0;
      return start_value(std::move(s), n.items, c, out);
    case kArrAfterItem:
      if (take_ws(f, c)) break;
      if (c == ',' && (n.max_count < 0 || f.a < n.max_count)) {
        f.phase = kArrAfterComma;
        f.b = 0;
        break;
      }
      if (c == ']' && f.a >= n.min_count) {
        child_done(s);
        break;
      }
      return;
    default: return;
  }
  out.push_back(std::move(s));
}

void JsonMatcher::feed_object(Stack s, const JsonNode& n, uint8_t c, std::vector<Stack>& out) const {
  Frame& f = s.back();
  const bool fixed = !n.properties.empty();
  // Fixed: properties after the last one written may follow, up to and
  // including the next required one (a required one cannot be skipped).
  auto required_after = [&](int32_t last) {
    for (size_t j = size_t(last + 1); j < n.properties.size(); ++j)
      if (n.properties[j].required) return true;
    return false;
  };
  auto open_keys = [&](Stack base) {
    base.back().phase = kObjInKey;
    base.back().b = 0;
    if (!fixed) {
      Frame key;
      key.role = Role::MapKey;
      key.node = base.back().node;
      key.phase = kStrBody;  // the quote is this byte
      base.push_back(key);
      out.push_back(std::move(base));
      return;
    }
    for (size_t j = size_t(base.back().a + 1); j < n.properties.size(); ++j) {
      Stack t = base;
      Frame key;
      key.role = Role::Key;
      key.node = t.back().node;
      key.a = int32_t(j);
      key.b = 1;  // the quote is this byte
      t.push_back(key);
      out.push_back(std::move(t));
      if (n.properties[j].required) break;
    }
  };
  switch (f.phase) {
    case kObjOpen:
      if (c != '{') return;
      f.phase = kObjAfterOpen;
      f.a = -1;
      break;
    case kObjAfterOpen:
    case kObjAfterComma:
      if (take_ws(f, c)) break;
      if (c == '}' && f.phase == kObjAfterOpen && (fixed ? !required_after(-1) : true)) {
        child_done(s);
        break;
      }
      if (c != '"' || (!fixed && n.additional < 0)) return;
      open_keys(std::move(s));
      return;
    case kObjAfterKey:
      if (take_ws(f, c)) break;
      if (c != ':') return;
      f.phase = kObjAfterColon;
      f.b = 0;
      break;
    case kObjAfterColon:
      if (take_ws(f, c)) break;
      f.phase = kObjInValue;
      f.b = 0;
      return start_value(std::move(s), fixed ? n.properties[size_t(f.a)].value : n.additional, c, out);
    case kObjAfterValue:
      if (take_ws(f, c)) break;
      if (c == ',' && (!fixed || size_t(f.a + 1) < n.properties.size())) {
        f.phase = kObjAfterComma;
        f.b = 0;
        break;
      }
      if (c == '}' && (!fixed || !required_after(f.a))) {
        child_done(s);
        break;
      }
      return;
    default: return;
  }
  out.push_back(std::move(s));
}

bool JsonMatcher::step(const State& from, uint8_t byte, State& to) const {
  to.stacks.clear();
  for (const Stack& s : from.stacks) feed_stack(s, byte, to.stacks);
  if (to.stacks.size() > 1) {
    std::sort(to.stacks.begin(), to.stacks.end());
    to.stacks.erase(std::unique(to.stacks.begin(), to.stacks.end()), to.stacks.end());
    if (to.stacks.size() > kMaxStacks) to.stacks.resize(kMaxStacks);
  }
  return !to.stacks.empty();
}

bool JsonMatcher::feed(State& state, std::string_view bytes) const {
  State cur = state, next;
  for (char c : bytes) {
    if (!step(cur, uint8_t(c), next)) return false;
    std::swap(cur, next);
  }
  state = std::move(cur);
  return true;
}

bool JsonMatcher::can_end(const State& state) const {
  for (const Stack& s : state.stacks) {
    if (s.size() == 1 && s[0].phase == kRootDone) return true;
    if (s.size() == 2 && s[1].role == Role::Value) {
      const Kind k = g_->nodes[size_t(s[1].node)].kind;
      if ((k == Kind::Number || k == Kind::Integer) && number_accepts_end(s[1].phase)) return true;
    }
  }
  return false;
}

bool JsonMatcher::in_string(const State& state) const {
  if (state.stacks.size() != 1) return false;
  const Frame& top = state.stacks[0].back();
  const bool string = top.role == Role::MapKey || (top.role == Role::Value && g_->nodes[size_t(top.node)].kind == Kind::String);
  return string && top.phase != kStrQuote;
}

int JsonMatcher::string_step(Frame& top, uint8_t c) const {
  Frame f = top;
  const bool value = top.role == Role::Value;
  const int r = string_byte(f, c, value ? g_->nodes[size_t(top.node)].min_count : 0, value ? g_->nodes[size_t(top.node)].max_count : -1);
  if (r == 1) top = f;
  return r;
}

bool JsonMatcher::finished(const State& state) const {
  if (state.stacks.empty()) return false;
  for (const Stack& s : state.stacks)
    if (s.size() != 1 || s[0].phase != kRootDone) return false;
  return true;
}

}  // namespace splitdec
