// A bounded fuzz run of the chat template interpreter: a few thousand
// templates from a deterministic generator (fixed seeds) -- random token
// soup, mutations of the real templates in the repository, deep nesting and
// extreme numbers -- each parsed and rendered under a time bound. A render
// may succeed or throw jinja::TemplateError; any other exception fails the
// test, and a crash (or a sanitizer report, in the ASan/UBSan build) ends it.
// The depth limits stay at their defaults, so that the stack they allow is
// what the sanitizer build exercises; the work and memory limits are smaller,
// to keep the whole run to seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prompt/chat_template.h"
#include "prompt/jinja/template.h"
#include "prompt/jinja/template_error.h"
#include "test_support.h"

namespace splitdec {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// splitmix64: the same sequence on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
  template <class T>
  const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }

 private:
  uint64_t state_;
};

const std::vector<std::string> kTokens = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{{-", "-}}", "{%-", "-%}", "if", "elif", "else", "endif", "for", "in",
    "endfor", "set", "endset", "macro", "endmacro", "filter", "endfilter", "not", "and", "or", "is", "loop",
    "break", "continue", "x", "n", "s", "ns", "ns.x", "messages", "message", "m", "f", "(", ")", "[", "]", "{",
    "}", ",", ":", ".", "|", "=", "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=",
    "0", "1", "-1", "2", "10", "63", "9223372036854775807", "9223372036854775808", "(-9223372036854775807-1)",
    "10**9", "10**12", "1e300", "1e-300", "0.5", "-0.0", "'a'", "''", "'\\n'", "\"b\"", "'{{'", "'%}'", "'日本'",
    "true", "none", "range(", "range(10**9)", "namespace(", "namespace(x=[])", "dict(", "raise_exception(",
    "|upper", "|lower", "|trim", "|length", "|tojson", "|tojson(indent=10**12)", "|string", "|int", "|float",
    "|abs", "|round", "|join", "|join(', ')", "|list", "|first", "|last", "|sort", "|unique", "|reverse",
    "|items", "|map('upper')", "|select", "|selectattr('role')", "|indent(10**12)", "|indent(4, true)",
    "|replace('a', 'aaaa')", "|replace('', 'xx')", "|sum", "|min", "|max", "|default('d')", "|dictsort",
    ".split(',')", ".split()", ".strip()", ".startswith('a')", ".replace('a', 'bb')", ".join(x)", ".items()",
    ".get('k')", "[::-1]", "[1:]", "[::9223372036854775807]", "[0]", "[-1]", "is defined", "is odd",
    "is divisibleby(-1)", "is divisibleby 0", "if x else", "* 10**12", "+ x", "~ s"};

const std::vector<std::string> kNumbers = {
    "0", "1", "-1", "2", "7", "-7", "63", "64", "9223372036854775807", "(-9223372036854775807-1)", "4294967296",
    "10**18", "1e300", "-1e300", "(1e300*1e300)", "(1e300*1e300-1e300*1e300)", "0.0", "-0.0", "2.5", "1e-320",
    "'99999999999999999999'", "'1e999'", "'nan'", "' -3 '", "true", "none", "x", "n"};

const std::vector<std::string> kBinary = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "<", ">=", "and", "or", "in"};

const std::vector<std::string> kNumberFilters = {"", "|int", "|float", "|abs", "|round", "|round(300)", "|string",
                                                 "|tojson", "|int(5)", "|float(1)", "|round(-9223372036854775807)"};

std::string token_soup(Rng& rng) {
  std::string out;
  const size_t n = 1 + rng.below(40);
  for (size_t k = 0; k < n; ++k) out += rng.pick(kTokens) + (rng.below(4) ? " " : "");
  if (rng.below(2)) out = (rng.below(2) ? "{{ " : "{% ") + out + (rng.below(2) ? " }}" : " %}");
  return out;
}

std::string mutate(Rng& rng, std::string source) {
  if (rng.below(3) == 0) {  // one number or filter into an expression, so that most still parse and render
    const size_t open = source.find("{{", rng.below(source.size()));
    if (open != std::string::npos) return source.insert(open + 2, " " + rng.pick(kNumbers) + rng.pick(kNumberFilters) + " ~ ");
  }
  const size_t edits = 1 + rng.below(4);
  for (size_t e = 0; e < edits && !source.empty(); ++e) {
    const size_t at = rng.below(source.size());
    const size_t span = std::min(source.size() - at, 1 + rng.below(64));
    switch (rng.below(6)) {
      case 0: source.erase(at, span); break;
      case 1: source.insert(rng.below(source.size()), source.substr(at, span)); break;
      case 2: source.insert(at, rng.pick(kTokens)); break;
      case 3: source.insert(at, rng.pick(kNumbers)); break;
      case 4: source[at] = "{}%#()[]|-+'\"\\.,:~ \nxa0"[rng.below(24)]; break;
      default: source.resize(at); break;
    }
  }
  return source;
}

std::string repeat(const std::string& s, size_t times) {
  std::string out;
  for (size_t k = 0; k < times; ++k) out += s;
  return out;
}

std::string deep_nesting(Rng& rng) {
  static const std::vector<size_t> depths = {1, 5, 20, 63, 64, 65, 100, 200, 255, 256, 257, 1000, 20000};
  const size_t d = rng.pick(depths);
  switch (rng.below(14)) {
    case 0: return "{{ " + repeat("[", d) + repeat("]", d) + " }}";
    case 1: return "{{ " + repeat("(", d) + "1" + repeat(")", d) + " }}";
    case 2: return "{{ 'a'" + repeat("|upper", d) + " }}";
    case 3: return "{{ 1" + repeat("+1", d) + " }}";
    case 4: return "{{ " + repeat("not ", d) + "1 }}";
    case 5: return "{{ " + repeat("-", d) + "1 }}";
    case 6: return repeat("{% if 1 %}", d) + "x" + repeat("{% endif %}", d);
    case 7: return repeat("{% for i in range(3) %}", d) + "x" + repeat("{% endfor %}", d);
    case 8: return "{{ x" + repeat(".a", d) + repeat("[0]", d % 7) + " }}";
    case 9:
      return "{% set ns = namespace(x=[]) %}{% for i in range(" + std::to_string(d) +
             ") %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x|tojson }}{{ ns.x }}{{ ns.x == ns.x }}";
    case 10: return "{% macro f(n) %}{{ f(n + 1)" + repeat("|string", d % 300) + " }}{% endmacro %}{{ f(0) }}";
    case 11: return "{{ " + repeat("{'a': ", d) + "1" + repeat("}", d) + " }}";
    case 12:
      return "{% set ns = namespace(s='ab') %}{% for i in range(" + std::to_string(d) +
             ") %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";
    default: return "{{ x" + repeat(" if x", d) + " }}";
  }
}

std::string number_expression(Rng& rng) {
  std::string e = rng.pick(kNumbers) + rng.pick(kNumberFilters);
  const size_t terms = rng.below(4);
  for (size_t k = 0; k < terms; ++k) e = "(" + e + " " + rng.pick(kBinary) + " " + rng.pick(kNumbers) + rng.pick(kNumberFilters) + ")";
  switch (rng.below(5)) {
    case 0: return "{{ range(" + e + ")|length }}";
    case 1: return "{{ 'ab' * " + e + " }}";
    case 2: return "{{ [1, 2, 3][" + e + ":" + rng.pick(kNumbers) + ":" + rng.pick(kNumbers) + "] }}";
    case 3: return "{{ 'x'|indent(" + e + ") }}{{ [1]|tojson(indent=" + e + ") }}";
    default: return "{{ " + e + " }}";
  }
}

ordered_json fuzz_context() {
  return ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]},
                 {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "a,b c"}],
    "bos_token": "<bos>", "eos_token": "<eos>", "add_generation_prompt": true,
    "x": [1, "two", [3], {"k": "v"}], "n": 9223372036854775807, "s": "a'b\"c\n日本"})");
}

struct Seed {
  std::string source;
  ordered_json context;
};

std::vector<Seed> real_templates() {
  std::vector<Seed> seeds;
  const ordered_json context = fuzz_context();
  seeds.push_back({test::read_file(GEMMA4_TEMPLATE), context});
  seeds.push_back({ChatTemplate::builtin_source("gemma3"), context});
  seeds.push_back({ChatTemplate::builtin_source("gemma4"), context});
  for (const auto& c : ordered_json::parse(test::read_file(JINJA_CORPUS))) seeds.push_back({c["template"], c["context"]});
  return seeds;
}

jinja::Limits fuzz_limits() {
  jinja::Limits limits;  // depths as shipped; work and memory smaller, to keep the run short
  limits.max_steps = 50'000;
  limits.max_loop_iterations = 20'000;
  limits.max_output_bytes = 1u << 20;
  limits.max_list_items = 100'000;
  limits.max_built_bytes = 32u << 20;
  return limits;
}

struct Tally {
  int rendered = 0, refused = 0;
  double slowest_s = 0;
};

// Parses and renders; fails the test on anything but success or TemplateError.
void check_one(const std::string& source, const ordered_json& context, const jinja::Limits& limits, Tally& tally) {
  const auto start = Clock::now();
  try {
    jinja::Template(source, limits).render(context);
    ++tally.rendered;
  } catch (const jinja::TemplateError&) {
    ++tally.refused;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a TemplateError: " << e.what() << "\ntemplate: " << ordered_json(source.substr(0, 400)).dump();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  tally.slowest_s = std::max(tally.slowest_s, seconds);
  EXPECT_LT(seconds, 5.0) << "template: " << ordered_json(source.substr(0, 400)).dump();
}

void report(const char* what, const Tally& tally) {
  std::printf("%s: %d rendered, %d refused, slowest %.3f s\n", what, tally.rendered, tally.refused, tally.slowest_s);
  ::testing::Test::RecordProperty(std::string(what) + "_rendered", tally.rendered);
  ::testing::Test::RecordProperty(std::string(what) + "_refused", tally.refused);
}

TEST(TemplateFuzz, TokenSoup) {
  Rng rng(1);
  Tally tally;
  const ordered_json context = fuzz_context();
  for (int k = 0; k < 2000; ++k) check_one(token_soup(rng), context, fuzz_limits(), tally);
  report("token_soup", tally);
}

TEST(TemplateFuzz, MutatedRealTemplates) {
  Rng rng(2);
  Tally tally;
  const std::vector<Seed> seeds = real_templates();
  for (const Seed& seed : seeds) check_one(seed.source, seed.context, fuzz_limits(), tally);  // unmutated: all render
  EXPECT_EQ(tally.refused, 0);
  for (int k = 0; k < 2000; ++k) {
    const Seed& seed = rng.pick(seeds);
    check_one(mutate(rng, seed.source), seed.context, fuzz_limits(), tally);
  }
  report("mutated", tally);
}

TEST(TemplateFuzz, DeepNesting) {
  Rng rng(3);
  Tally tally;
  const ordered_json context = fuzz_context();
  for (int k = 0; k < 300; ++k) check_one(deep_nesting(rng), context, fuzz_limits(), tally);
  report("deep_nesting", tally);
}

TEST(TemplateFuzz, ExtremeNumbers) {
  Rng rng(4);
  Tally tally;
  const ordered_json context = fuzz_context();
  for (int k = 0; k < 1000; ++k) check_one(number_expression(rng), context, fuzz_limits(), tally);
  report("numbers", tally);
}

}  // namespace
}  // namespace splitdec
