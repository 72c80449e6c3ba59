#include "prompt/jinja/int_math.h"

#include <cmath>
#include <limits>

#include "prompt/jinja/eval_failure.h"
#include "prompt/jinja/value.h"

namespace splitdec::jinja {
namespace {

[[noreturn]] void overflow(const char* op) { throw EvalFailure{std::string("integer overflow in '") + op + "'"}; }

}  // namespace

int64_t int_add(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(op);
  return r;
}

int64_t int_sub(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow(op);
  return r;
}

int64_t int_mul(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(op);
  return r;
}

int64_t int_neg(int64_t a, const char* op) { return int_sub(0, a, op); }

int64_t int_abs(int64_t a) { return a < 0 ? int_neg(a, "abs") : a; }

int64_t int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  for (int64_t e = exponent; e > 0; e >>= 1) {  // by squaring, so a huge exponent fails fast
    if (e & 1) result = int_mul(result, base, "**");
    if (e > 1) base = int_mul(base, base, "**");
  }
  return result;
}

int64_t int_floor_div(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow("//");  // the one quotient past the range
  int64_t q = a / b;
  if (a % b != 0 && ((a % b < 0) != (b < 0))) --q;
  return q;
}

int64_t int_floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // INT64_MIN % -1 traps in C++; Python's answer is 0
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;  // opposite signs: cannot overflow
  return m;
}

int64_t float_to_int(double x, const std::string& what) {
  // 2^63 is exact as a double; every double in [-2^63, 2^63) truncates into range.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (!(x >= -kTwo63 && x < kTwo63))
    throw EvalFailure{what + ": " + float_repr(x) + " does not fit in a 64-bit integer"};
  return static_cast<int64_t>(x);
}

}  // namespace splitdec::jinja
