// The chat template interpreter's own limits (src/prompt/jinja/limits.h):
// each input of the hostile review (issue 34) that overflowed the stack,
// trapped, hit undefined behaviour, ran without end or exhausted memory is
// here a TemplateError whose message names the limit it passed. Python's
// integer semantics (floor division, the divisor's sign) are checked beside
// the overflow cases, and the int/float filters on out-of-range values.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "prompt/jinja/template.h"
#include "prompt/jinja/template_error.h"

namespace splitdec {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& source, const ordered_json& context = ordered_json::object(),
                   const jinja::Limits& limits = {}) {
  return jinja::Template(source, limits).render(context);
}

// The message of the TemplateError that parsing or rendering throws; fails
// the test on success or on any other exception.
std::string error_of(const std::string& source, const jinja::Limits& limits = {},
                     const ordered_json& context = ordered_json::object()) {
  try {
    const std::string out = render(source, context, limits);
    ADD_FAILURE() << "rendered without an error (" << out.size() << " bytes): " << source.substr(0, 200);
  } catch (const jinja::TemplateError& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int times) {
  std::string out;
  for (int k = 0; k < times; ++k) out += s;
  return out;
}

::testing::AssertionResult names(const std::string& message, const std::string& limit) {
  if (message.find("(" + limit + ")") != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << message << "' does not name " << limit;
}

// ---- stack: parsing -------------------------------------------------------------

TEST(TemplateLimits, FilterChainOf100000IsRefusedWhileParsing) {
  const std::string message = error_of("{{ 'a'" + repeat("|upper", 100000) + " }}");
  EXPECT_TRUE(names(message, "max_expression_depth")) << message;
  EXPECT_NE(message.find("limit of 256"), std::string::npos) << message;
}

TEST(TemplateLimits, OperatorChainOf200000IsRefusedWhileParsing) {
  EXPECT_TRUE(names(error_of("{{ 1" + repeat("+1", 200000) + " }}"), "max_expression_depth"));
  for (const std::string op : {"-", "*", "~", " and ", " or ", "==", " in ", "//"})
    EXPECT_TRUE(names(error_of("{{ 1" + repeat(op + "1", 20000) + " }}"), "max_expression_depth")) << op;
}

TEST(TemplateLimits, PostfixAndTestChainsAreRefusedWhileParsing) {
  EXPECT_TRUE(names(error_of("{{ x" + repeat(".a", 100000) + " }}"), "max_expression_depth"));
  EXPECT_TRUE(names(error_of("{{ x" + repeat("[0]", 100000) + " }}"), "max_expression_depth"));
  EXPECT_TRUE(names(error_of("{{ x" + repeat("()", 100000) + " }}"), "max_expression_depth"));
  EXPECT_TRUE(names(error_of("{{ x" + repeat(" is defined", 100000) + " }}"), "max_expression_depth"));
  EXPECT_TRUE(names(error_of("{{ x" + repeat(" if x", 100000) + " }}"), "max_expression_depth"));
}

TEST(TemplateLimits, NestedBracketsAndPrefixOperatorsAreRefusedWhileParsing) {
  EXPECT_TRUE(names(error_of("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), "max_depth"));
  EXPECT_TRUE(names(error_of("{{ " + repeat("{'a': ", 100000) + "1" + repeat("}", 100000) + " }}"), "max_depth"));
  EXPECT_TRUE(names(error_of("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), "max_depth"));
  EXPECT_TRUE(names(error_of("{{ " + repeat("not ", 100000) + "1 }}"), "max_depth"));
  EXPECT_TRUE(names(error_of("{{ " + repeat("-", 100000) + "1 }}"), "max_depth"));
  EXPECT_TRUE(names(error_of(repeat("{% if 1 %}", 100000)), "max_depth"));
}

TEST(TemplateLimits, LiteralPastTheStringCapIsRefusedWhileParsing) {
  EXPECT_TRUE(names(error_of("{{ '" + std::string((16u << 20) + 1, 'a') + "' }}"), "max_output_bytes"));
}

TEST(TemplateLimits, ChainsWithinTheLimitStillRender) {
  EXPECT_EQ(render("{{ 1" + repeat("+1", 200) + " }}"), "201");
  EXPECT_EQ(render("{{ 'a'" + repeat("|upper", 200) + " }}"), "A");
}

// ---- stack: rendering -------------------------------------------------------------

TEST(TemplateLimits, ValueNested100000DeepByTheTemplateIsRefused) {
  const std::string build =
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
  for (const std::string use : {"{{ ns.x|tojson }}", "{{ ns.x }}", "{{ ns.x == ns.x }}", "{{ ns.x < ns.x }}"}) {
    const std::string message = error_of(build + use);
    EXPECT_TRUE(names(message, "max_value_depth")) << message;
    EXPECT_NE(message.find("limit of 128"), std::string::npos) << message;
  }
  EXPECT_TRUE(names(error_of("{% set x = [] %}{% for i in range(200) %}{% set x = {'k': x} %}{% endfor %}"), "max_value_depth"));
}

TEST(TemplateLimits, NamespacesCannotHoldNamespacesSoNoValueIsCyclic) {
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("cannot hold a namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.l = [1, [ns]] %}").find("cannot hold a namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set a = namespace() %}{% set b = namespace(x=a) %}").find("cannot hold a namespace"), std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(n=1) %}{% set l = [ns, ns] %}{% set ns.n = 2 %}{{ l[0].n }}"), "2");
}

TEST(TemplateLimits, DeepContextIsRefused) {
  ordered_json context = ordered_json::object();
  context["x"] = ordered_json::parse(std::string(10000, '[') + std::string(10000, ']'));
  const std::string message = error_of("{{ x }}", {}, context);
  EXPECT_TRUE(names(message, "max_value_depth")) << message;
}

TEST(TemplateLimits, MacroRecursionIsRefused) {
  EXPECT_TRUE(names(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "max_depth"));
  EXPECT_TRUE(names(error_of("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"),
                    "max_depth"));
  // Each call deep in its own expression: the evaluations in progress pass their limit first.
  const std::string message = error_of("{% macro f(n) %}{{ f(n + 1)" + repeat("|string", 200) + " }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(names(message, "max_render_depth")) << message;
}

// ---- integers ---------------------------------------------------------------------

TEST(TemplateLimits, IntegerOverflowIsAnErrorNeverUndefinedBehaviour) {
  const std::string min = "(-9223372036854775807-1)";
  EXPECT_NE(error_of("{{ " + min + "//-1 }}").find("integer overflow in '//'"), std::string::npos);
  EXPECT_EQ(render("{{ " + min + " % -1 }}"), "0");
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow in '+'"), std::string::npos);
  EXPECT_NE(error_of("{{ " + min + " - 1 }}").find("integer overflow in '-'"), std::string::npos);
  EXPECT_NE(error_of("{{ 4294967296 * 4294967296 }}").find("integer overflow in '*'"), std::string::npos);
  EXPECT_NE(error_of("{{ -" + min + " }}").find("integer overflow in 'unary -'"), std::string::npos);
  EXPECT_NE(error_of("{{ 3 ** 40 }}").find("integer overflow in '**'"), std::string::npos);
  EXPECT_NE(error_of("{{ " + min + "|abs }}").find("integer overflow in 'abs'"), std::string::npos);
  EXPECT_NE(error_of("{{ [9223372036854775807, 1]|sum }}").find("integer overflow in 'sum'"), std::string::npos);
  EXPECT_EQ(render("{{ " + min + " is divisibleby(-1) }} {{ -3 is odd }}"), "True True");
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 9223372036854775807 }}"),
            "4611686018427387904 -9223372036854775808 1");
}

TEST(TemplateLimits, DivisionAndModuloFollowPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 // -2 }} {{ -7 // -2 }}"), "3 -4 -4 3");
  EXPECT_EQ(render("{{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7 % -3 }}"), "1 2 -2 -1");
  EXPECT_EQ(render("{{ -7.5 // 2 }} {{ 7.5 % -2 }}"), "-4.0 -0.5");
  for (const std::string e : {"1 // 0", "1 % 0", "1 / 0", "1.0 // 0.0", "1 % 0.0"})
    EXPECT_NE(error_of("{{ " + e + " }}").find("division by zero"), std::string::npos) << e;
}

TEST(TemplateLimits, RangesAndSlicesNearTheInt64EdgesDoNotOverflow) {
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"),
            "[9223372036854775800, 9223372036854775805]");
  EXPECT_EQ(render("{{ range(-9223372036854775807, -9223372036854775807-1, -9223372036854775807)|list }}"),
            "[-9223372036854775807]");
  EXPECT_EQ(render("{{ [1, 2, 3][::9223372036854775807] }} {{ [1, 2, 3][::(-9223372036854775807-1)] }}"), "[1] [3]");
  EXPECT_EQ(render("{{ 'abc'[-9223372036854775807-1:9223372036854775807] }}"), "abc");
}

TEST(TemplateLimits, FloatToIntOutOfRangeNamesTheValue) {
  EXPECT_NE(error_of("{{ 1e300|int }}").find("filter 'int': 1e+300 does not fit in a 64-bit integer"), std::string::npos);
  EXPECT_NE(error_of("{{ (1e300 * 1e300)|int }}").find("inf does not fit"), std::string::npos);
  EXPECT_NE(error_of("{{ 9.3e18|int }}").find("9.3e+18 does not fit"), std::string::npos);
  EXPECT_NE(error_of("{{ '99999999999999999999'|int }}").find("99999999999999999999 does not fit"), std::string::npos);
  EXPECT_NE(error_of("{{ '1e300'|int }}").find("1e+300 does not fit"), std::string::npos);
  EXPECT_EQ(render("{{ 9.2e18|int }} {{ -9.2e18|int }} {{ (1e300 * 1e300 - 1e300 * 1e300)|int }}"),
            "9200000000000000000 -9200000000000000000 0");
  EXPECT_EQ(render("{{ '12'|int }} {{ ' -7 '|int }} {{ '+3.9'|int }} {{ 'abc'|int(5) }} {{ '0x10'|int }} {{ '-9223372036854775808'|int }}"),
            "12 -7 3 5 0 -9223372036854775808");
  EXPECT_EQ(render("{{ '1e999'|float }} {{ '-inf'|float }} {{ 'abc'|float }} {{ ' 2.5 '|float }} {{ '1.5abc'|float }} {{ '1e-999'|float }}"),
            "inf -inf 0.0 2.5 0.0 0.0");
}

// ---- time ---------------------------------------------------------------------------

// Where the limit's value does not matter to the case, a smaller one keeps
// the test short in the Debug+ASan build (where a step costs ~20x more).
jinja::Limits small_budget() {
  jinja::Limits limits;
  limits.max_steps = 200'000;
  return limits;
}

TEST(TemplateLimits, EndlessLoopsAreRefused) {
  EXPECT_TRUE(names(error_of("{% for i in range(10**9) %}{% for j in range(10**9) %}{% endfor %}{% endfor %}"),
                    "max_loop_iterations"));
  jinja::Limits few_iterations;
  few_iterations.max_loop_iterations = 50'000;
  EXPECT_TRUE(names(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
                             "{% endfor %}{% endfor %}{% endfor %}", few_iterations),
                    "max_loop_iterations"));
  const jinja::Limits budget = small_budget();
  // Work without loop iterations: n^2 comparisons, a big list copied, a long string decoded.
  EXPECT_TRUE(names(error_of("{{ range(100000)|unique|length }}", budget), "max_steps"));
  EXPECT_TRUE(names(error_of("{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l|first }}{% endfor %}", budget),
                    "max_steps"));
  EXPECT_TRUE(names(error_of("{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{{ s[5] }}{% endfor %}", budget),
                    "max_steps"));
  jinja::Limits few_steps;
  few_steps.max_steps = 1000;
  const std::string message = error_of("{% for i in range(2000) %}{{ i }}{% endfor %}", few_steps);
  EXPECT_NE(message.find("the render takes more than the limit of 1000 steps (max_steps)"), std::string::npos) << message;
}

// ---- memory -------------------------------------------------------------------------

TEST(TemplateLimits, HugeStringsAreRefusedBeforeTheyAreBuilt) {
  for (const std::string source : {
           "{{ 'a' * 10**12 }}",
           "{{ 'ab' * 10000000 }}",
           "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
           "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
           "{{ ('a' * 1000000)|replace('a', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa') }}",
           "{{ ('a' * 1000000).replace('a', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa') }}",
           "{{ ('a' * 1000000)|replace('', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') }}",
           "{{ range(100000)|map('string')|join('x' * 1000) }}",
           "{{ ('x' * 1000).join(range(100000)|map('string')|list) }}",
           "{{ 'a'|indent(10**12, true) }}",
           "{{ ('a\n' * 10000)|indent(2000) }}",
           "{{ [1, [2]]|tojson(indent=10**12) }}",
           "{{ ['x' * 1000000] * 3 }}",
       }) {
    const std::string message = error_of(source);
    EXPECT_TRUE(names(message, "max_output_bytes") || message.find("cannot combine") != std::string::npos)
        << source << ": " << message;
  }
  EXPECT_EQ(render("{{ '' * 10**18 }}|{{ 'ab' * -3 }}|{{ 'a'|indent(-5, true) }}"), "||a");
}

TEST(TemplateLimits, SharedValuesPrintingPastTheCapAreRefused) {
  jinja::Limits small_output;
  small_output.max_output_bytes = 1000;
  const std::string doubled =
      "{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}";
  for (const std::string use : {"{{ ns.x }}", "{{ ns.x|tojson }}", "{{ ns.x|string|length }}", "{{ ns.x|tojson(indent=2) }}"}) {
    const std::string message = error_of(doubled + use, small_output);
    EXPECT_TRUE(names(message, "max_output_bytes")) << use << ": " << message;
  }
}

TEST(TemplateLimits, HugeListsAreRefusedBeforeTheyAreBuilt) {
  EXPECT_TRUE(names(error_of("{{ range(10**12)|length }}"), "max_loop_iterations"));
  EXPECT_TRUE(names(error_of("{{ range(200000)|length }}"), "max_list_items"));
  EXPECT_TRUE(names(error_of("{{ ('a' * 200000)|list|length }}"), "max_list_items"));
  EXPECT_TRUE(names(error_of("{{ ('a,' * 150000).split(',')|length }}"), "max_list_items"));
  EXPECT_TRUE(names(error_of("{{ ('a ' * 150000).split()|length }}"), "max_list_items"));
  EXPECT_TRUE(names(error_of("{% set l = range(80000)|list %}{{ (l + l)|length }}"), "max_list_items"));
}

jinja::Limits less_memory() {
  jinja::Limits limits;
  limits.max_built_bytes = 32u << 20;
  return limits;
}

TEST(TemplateLimits, WhatOneRenderBuildsIsBoundedInTotal) {
  // Each value is within its own cap; together they are not.
  const std::string message = error_of(
      "{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = ns.l + [('x' * 8000000) ~ i] %}{% endfor %}",
      less_memory());
  EXPECT_TRUE(names(message, "max_built_bytes"));
  EXPECT_NE(message.find("limit of 33554432 bytes"), std::string::npos) << message;
  EXPECT_TRUE(names(error_of("{% set ns = namespace(l=[]) %}{% for i in range(10000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                             less_memory()),
                    "max_built_bytes"));
}

TEST(TemplateLimits, OtherOutOfRangeInputsAreNotCrashes) {
  EXPECT_EQ(render("{{ [1].99999999999999999999 }}|{{ [1]|attr('99999999999999999999') }}"), "|");
  EXPECT_EQ(render("{{ x|tojson }}", ordered_json{{"x", 18446744073709551615u}}), "1.8446744073709552e+19");
}

}  // namespace
}  // namespace splitdec
