#include "serve/json_limits.h"

#include <nlohmann/json.hpp>

#include "serve/api_error.h"

namespace splitdec::serve {

namespace {

// Counts as the parser reads; stops at the first limit passed.
class ShapeCounter : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit ShapeCounter(const JsonLimits& limits) : limits_(limits) {}
  std::string passed;  // the limit that stopped the pass, if any

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool value() {
    if (++values_ <= limits_.max_values) return true;
    passed = "the request JSON holds more than " + std::to_string(limits_.max_values) + " values (the server's limit)";
    return false;
  }
  bool open() {
    if (++depth_ > limits_.max_depth) {
      passed = "the request JSON nests deeper than " + std::to_string(limits_.max_depth) + " levels (the server's limit)";
      return false;
    }
    return value();
  }
  bool close() {
    --depth_;
    return true;
  }

  const JsonLimits& limits_;
  size_t values_ = 0;
  int depth_ = 0;
};

}  // namespace

void check_json_limits(const std::string& body, const JsonLimits& limits) {
  ShapeCounter counter(limits);
  nlohmann::json::sax_parse(body, &counter);
  if (!counter.passed.empty()) throw ApiError(400, counter.passed, "", "request_too_complex");
}

}  // namespace splitdec::serve
