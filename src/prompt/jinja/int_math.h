// Python's integer arithmetic on int64: Python's ints never overflow, ours
// would (undefined behaviour, or a SIGFPE for INT64_MIN // -1), so every
// operation that can leave the range throws EvalFailure ("integer overflow
// in '+'") instead. Division and modulo floor as Python's do.
#pragma once

#include <cstdint>
#include <string>

namespace splitdec::jinja {

int64_t int_add(int64_t a, int64_t b, const char* op = "+");
int64_t int_sub(int64_t a, int64_t b, const char* op = "-");
int64_t int_mul(int64_t a, int64_t b, const char* op = "*");
int64_t int_neg(int64_t a, const char* op = "unary -");
int64_t int_abs(int64_t a);
int64_t int_pow(int64_t base, int64_t exponent);  // exponent >= 0
// `b` non-zero; the quotient rounds toward negative infinity, the remainder
// takes the divisor's sign.
int64_t int_floor_div(int64_t a, int64_t b);
int64_t int_floor_mod(int64_t a, int64_t b);

// A float as an int, truncated as Python's int(x); NaN, infinities and
// values past the int64 range throw an EvalFailure naming the value and `what`.
int64_t float_to_int(double x, const std::string& what);

}  // namespace splitdec::jinja
