// Structured output: the schema compiler, the byte matcher, the vocabulary
// trie and the constraint the sampler obeys. The trie's one-walk mask is
// checked against the naive per-token check, and sampled replies against a
// naive validator written here from JSON Schema's rules (independent of the
// matcher), under every sampler setting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "generate/json_constraint.h"
#include "generate/json_matcher.h"
#include "generate/json_schema.h"
#include "generate/sampler.h"
#include "generate/token_trie.h"
#include "tokenizer/tokenizer.h"
#include "test_support.h"

namespace splitdec {
namespace {

using ojson = nlohmann::ordered_json;

JsonGrammar grammar(const std::string& schema) { return compile_json_schema(ojson::parse(schema), "schema"); }

bool accepts(const JsonGrammar& g, const std::string& doc) {
  JsonMatcher m(g);
  JsonMatcher::State s = m.start();
  return m.feed(s, doc) && m.can_end(s);
}

const char* kPerson = R"({"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer"},
    "email": {"type": "string"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "minItems": 1, "maxItems": 2}},
  "required": ["name", "age"]})";

const char* kTree = R"({"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
  "required": ["v"]}}, "$ref": "#/$defs/node"})";

const char* kShapes = R"({"anyOf": [
    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
    {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer"}}, "required": ["kind", "side"]},
    {"type": ["boolean", "null"]}]})";

TEST(JsonMatcher, AcceptsValidDocumentsAndRefusesInvalidOnes) {
  const JsonGrammar person = grammar(kPerson);
  EXPECT_TRUE(accepts(person, R"({"name":"Bo","age":42})"));
  EXPECT_TRUE(accepts(person, "{\n  \"name\": \"Bo\",\n  \"age\": -0\n}"));
  EXPECT_TRUE(accepts(person, "{\n  \"name\": \"Bo\",\n\t\"age\": 7, \"email\": \"x@y\", \"tags\": [null, \"b\"]\n}"));
  EXPECT_TRUE(accepts(person, R"({"name":"\u00e9\n\"","age":1})"));  // escapes count as one character each
  EXPECT_TRUE(accepts(person, "{\"name\":\"\xC3\xA9t\xE2\x82\xAC\",\"age\":1}"));  // UTF-8: three characters
  EXPECT_FALSE(accepts(person, R"({"age":42,"name":"Bo"})"));         // properties in the schema's order
  EXPECT_FALSE(accepts(person, R"({"name":"Bo"})"));                  // age is required
  EXPECT_FALSE(accepts(person, R"({"age":42})"));                     // ... and so is name
  EXPECT_FALSE(accepts(person, R"({"name":"","age":1})"));            // minLength
  EXPECT_FALSE(accepts(person, R"({"name":"123456789","age":1})"));   // maxLength
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":4.5})"));        // integer
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":01})"));         // no leading zero
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":1,"tags":[]})"));         // minItems
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":1,"tags":["a","a","a"]})"));  // maxItems
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":1,"tags":["c"]})"));      // enum
  EXPECT_FALSE(accepts(person, R"({"name":"Bo","age":1,"other":1})"));        // no unlisted property
  EXPECT_FALSE(accepts(person, " {\"name\":\"Bo\",\"age\":1}"));               // nothing before the value
  EXPECT_FALSE(accepts(person, "{\"name\":\"Bo\",\"age\":1} "));               // ... nor after it
  EXPECT_FALSE(accepts(person, "{\"name\":\"\xC0\x80\",\"age\":1}"));         // overlong UTF-8
  EXPECT_FALSE(accepts(person, "{\"name\":\"\xED\xA0\x80\",\"age\":1}"));     // a surrogate in UTF-8
  EXPECT_FALSE(accepts(person, R"({"name":"\ud800","age":1})"));              // ... or escaped
  EXPECT_FALSE(accepts(person, "{\"name\":\"a\x01\",\"age\":1}"));            // a control character
  EXPECT_FALSE(accepts(person, "{  \"name\":\"Bo\",\"age\":1}"));              // two spaces
  EXPECT_FALSE(accepts(person, "{\n" + std::string(kMaxIndent + 1, ' ') + "\"name\":\"Bo\",\"age\":1}"));
  EXPECT_TRUE(accepts(person, "{\n" + std::string(kMaxIndent, ' ') + "\"name\":\"Bo\",\"age\":1}"));

  const JsonGrammar tree = grammar(kTree);
  EXPECT_TRUE(accepts(tree, R"({"v":1.5e3,"kids":[{"v":-0.25},{"v":2,"kids":[{"v":0E-7}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1.})"));
  EXPECT_FALSE(accepts(tree, R"({"v":.5})"));
  EXPECT_FALSE(accepts(tree, R"({"v":+1})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1,"kids":[{"v":1},{"v":1},{"v":1},{"v":1}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1234567890123456})"));  // past the 15 digits a JavaScript number keeps

  const JsonGrammar shapes = grammar(kShapes);
  EXPECT_TRUE(accepts(shapes, R"({"kind":"circle","r":2.5})"));
  EXPECT_TRUE(accepts(shapes, R"({"kind":"square","side":2})"));
  EXPECT_TRUE(accepts(shapes, "null"));
  EXPECT_TRUE(accepts(shapes, "false"));
  EXPECT_FALSE(accepts(shapes, R"({"kind":"square","r":2})"));
  EXPECT_FALSE(accepts(shapes, R"({"kind":"square","side":2.5})"));

  const JsonGrammar object = any_json_object_grammar();
  EXPECT_TRUE(accepts(object, R"({"a":[1,{"b":null}],"c":"d","a":true})"));
  EXPECT_TRUE(accepts(object, "{}"));
  EXPECT_FALSE(accepts(object, "[]"));
  EXPECT_FALSE(accepts(object, R"({"a":})"));

  const JsonGrammar number = grammar(R"({"type": "number"})");
  JsonMatcher m(number);
  JsonMatcher::State s = m.start();
  ASSERT_TRUE(m.feed(s, "12"));
  EXPECT_TRUE(m.can_end(s));  // a number may end here or go on
  EXPECT_FALSE(m.finished(s));
  ASSERT_TRUE(m.feed(s, ".5"));
  EXPECT_FALSE(m.feed(s, "x"));
  const JsonGrammar flag = grammar(R"({"type": "boolean"})");
  JsonMatcher mf(flag);
  JsonMatcher::State sf = mf.start();
  ASSERT_TRUE(mf.feed(sf, "true"));
  EXPECT_TRUE(mf.finished(sf));
}

TEST(JsonSchema, RefusesWhatItCannotEnforceNamingTheKeyword) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "integer", "minimum": 3})", "\"minimum\" is not supported"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}})", "at /properties/a: the keyword \"pattern\""},
      {R"({"$ref": "#/$defs/missing"})", "points at nothing"},
      {R"({"$ref": "http://example.com/s.json"})", "only references inside this schema"},
      {R"({"$ref": "#"})", "refers to itself"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "refers to itself"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "required names \"b\""},
      {R"({"enum": []})", "enum must be a non-empty array"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "maxItems is below minItems"},
      {R"({"type": "string", "enum": [1]})", "not of the schema's type"},
      {R"({"type": "strings"})", "not a JSON Schema type"},
      {R"(false)", "allows no value"},
      {R"({"allOf": [{}]})", "\"allOf\" is not supported"},
      {R"({"type": "array", "items": [{}]})", "tuples"},
      {R"({"type": "string", "maxLength": -1})", "maxLength must be an integer"},
  };
  for (const auto& [schema, want] : cases) {
    try {
      grammar(schema);
      ADD_FAILURE() << schema << " compiled";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << schema << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("schema", 0), 0u) << e.what();  // names where it is
    }
  }
  std::string deep = "{}";
  for (int i = 0; i < kMaxSchemaDepth + 4; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_THROW(grammar(deep), InputError);
  std::string wide = R"({"enum": [)";
  for (size_t i = 0; i <= kMaxJsonNodes; ++i) wide += (i ? "," : "") + std::to_string(i);
  EXPECT_THROW(grammar(wide + "]}"), InputError);
}

TEST(JsonSchema, EmptySchemasEnumsAndUnionsFromTheReview) {
  // {} and annotation-only schemas are any value, wherever they stand.
  EXPECT_TRUE(accepts(grammar("{}"), "3"));
  EXPECT_TRUE(accepts(grammar(R"({"title": "anything"})"), R"({"x":["y"]})"));
  const JsonGrammar any_a = grammar(R"({"type": "object", "properties": {"a": {}}, "required": ["a"]})");
  EXPECT_TRUE(accepts(any_a, R"({"a":[1,{"b":null}]})"));
  EXPECT_TRUE(accepts(grammar(R"({"type": "array", "items": {"description": "d"}, "minItems": 1})"), R"([true,"s"])"));
  // An enum is one parse: every value stays reachable however many there are,
  // and values that are prefixes of others ([1, 12, 123]) each end where they end.
  std::string many = R"({"enum": [)";
  for (int i = 0; i < 300; ++i) many += (i ? ",\"v" : "\"v") + std::to_string(i) + "\"";
  const JsonGrammar big = grammar(many + "]}");
  for (const char* v : {"\"v0\"", "\"v2\"", "\"v29\"", "\"v299\"", "\"v150\""}) EXPECT_TRUE(accepts(big, v)) << v;
  EXPECT_FALSE(accepts(big, "\"v300\""));
  const JsonGrammar prefixes = grammar(R"({"enum": [123, 1, 12, "1"]})");
  for (const char* v : {"1", "12", "123", "\"1\""}) EXPECT_TRUE(accepts(prefixes, v)) << v;
  EXPECT_FALSE(accepts(prefixes, "1234"));
  EXPECT_FALSE(accepts(prefixes, "13"));
  // The same $ref many times over is one alternative.
  std::string same = R"({"$defs": {"s": {"type": "string"}}, "anyOf": [)";
  for (int i = 0; i < 5000; ++i) same += std::string(i ? "," : "") + R"({"$ref": "#/$defs/s"})";
  EXPECT_TRUE(accepts(grammar(same + "]}"), "\"ok\""));
  // Huge floats are integers to JSON Schema.
  EXPECT_TRUE(accepts(grammar(R"({"type": "integer", "enum": [1e300, 2.0]})"), "2.0"));
  // What cannot be enforced is refused, not narrowed or ignored.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"type": "string", "enum": ["a", "bbbb"], "maxLength": 2})", "\"maxLength\" beside enum"},
      {R"({"type": "object", "properties": []})", "properties must be an object"},
      {R"({"type": "object", "properties": {"a": {}}, "additionalProperties": {"minimum": 1}})", "\"minimum\""},
  };
  for (const auto& [schema, want] : refused) {
    try {
      grammar(schema);
      ADD_FAILURE() << schema << " compiled";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << schema << ": " << e.what();
    }
  }
  std::string wide = R"({"anyOf": [)";
  for (size_t i = 0; i <= kMaxUnionAlternatives; ++i)
    wide += (i ? "," : "") + std::string(R"({"type": "string", "maxLength": )") + std::to_string(i + 1) + "}";
  EXPECT_THROW(grammar(wide + "]}"), InputError);
  std::string chain = R"({"$defs": {)";
  for (int i = 0; i < 300; ++i) chain += (i ? "," : "") + std::string("\"a") + std::to_string(i) + R"(": {"$ref": "#/$defs/a)" + std::to_string(i + 1) + "\"}";
  EXPECT_THROW(grammar(chain + R"(, "a300": {"type": "string"}}, "$ref": "#/$defs/a0"})"), InputError);
}

// A vocabulary with every single byte a JSON document needs, multi-byte
// pieces that cross token boundaries ("\":", "},{", "true,"), UTF-8 and a
// few special tokens (left out), like a real one.
struct TestVocabulary {
  std::vector<std::string> texts;
  std::vector<bool> usable;
  std::vector<int> stops;
};

TestVocabulary test_vocabulary(uint32_t seed) {
  TestVocabulary v;
  for (int c = 0x20; c < 0x7F; ++c) v.texts.push_back(std::string(1, char(c)));
  for (const char* t : {"\n", "\n  ", "\t", "\":", "\": \"", "},{", "}]", "[{", "true", "true,", "null", "false", "12",
                        "0.", "e-", "\\u00", "\\n", "\"name", "name", "age", "\"age\":", "kind", "circle", "square",
                        "\xC3\xA9", "\xE2\x82\xAC", "\xC3", "\xA9", "\xF0\x9F\x98\x80", "  ", "   \"", "\r"})
    v.texts.push_back(t);
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[]\":, abc0123456789.-eE\\untrlfs";
  for (int i = 0; i < 200; ++i) {
    std::string t;
    const int n = 1 + int(rng() % 5);
    for (int k = 0; k < n; ++k) t += alphabet[rng() % alphabet.size()];
    v.texts.push_back(t);
  }
  v.usable.assign(v.texts.size(), true);
  for (int k = 0; k < 3; ++k) {  // special tokens: an end and two that write no reply text
    v.texts.push_back("<special>");
    v.usable.push_back(false);
  }
  v.stops = {int(v.texts.size()) - 3};
  // A second stop token whose text is in the trie ("}"): it still ends the
  // reply, so it must be refused wherever the document cannot end.
  v.texts.push_back("}");
  v.usable.push_back(true);
  v.stops.push_back(int(v.texts.size()) - 1);
  return v;
}

// What the trie walk must equal: each token fed on its own.
std::vector<char> naive_allowed(const JsonConstraint& c, size_t vocab) {
  std::vector<char> out(vocab);
  for (size_t t = 0; t < vocab; ++t) out[t] = c.allows(int(t));
  return out;
}

std::vector<char> walked_allowed(const JsonConstraint& c, size_t vocab) {
  std::vector<float> logits(vocab, 0.f);
  c.mask(logits);
  std::vector<char> out(vocab);
  for (size_t t = 0; t < vocab; ++t) out[t] = logits[t] == 0.f;
  return out;
}

TEST(JsonConstraint, TrieMaskEqualsTheNaivePerTokenCheck) {
  for (const char* schema : {kPerson, kTree, kShapes, R"({"type": "object"})", R"({"type": "number"})"}) {
    for (uint32_t seed = 0; seed < 4; ++seed) {
      const TestVocabulary v = test_vocabulary(seed);
      auto g = std::make_shared<const JsonGrammar>(grammar(schema));
      JsonConstraint c(g, TokenTrie::from_texts(v.texts, v.usable), v.stops);
      std::mt19937 rng(seed * 7 + 1);
      // A random walk through allowed tokens: every state on the way is checked.
      for (int step = 0; step < 60; ++step) {
        const auto naive = naive_allowed(c, v.texts.size());
        ASSERT_EQ(walked_allowed(c, v.texts.size()), naive) << schema << " seed " << seed << " step " << step;
        std::vector<int> allowed;
        for (size_t t = 0; t < naive.size(); ++t)
          if (naive[t]) allowed.push_back(int(t));
        ASSERT_FALSE(allowed.empty()) << schema << " dead end at step " << step;
        const int t = allowed[rng() % allowed.size()];
        if (std::find(v.stops.begin(), v.stops.end(), t) != v.stops.end()) break;
        c.accept(t);
      }
    }
  }
}

// --- A naive validator for the supported subset, from JSON Schema's rules. ---
bool valid(const ojson& doc, const ojson& schema, const ojson& root);

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool of_type(const ojson& doc, const std::string& t) {
  if (t == "object") return doc.is_object();
  if (t == "array") return doc.is_array();
  if (t == "string") return doc.is_string();
  if (t == "number") return doc.is_number();
  if (t == "integer") return doc.is_number_integer() || (doc.is_number_float() && std::floor(doc.get<double>()) == doc.get<double>());
  if (t == "boolean") return doc.is_boolean();
  return t == "null" && doc.is_null();
}

bool valid(const ojson& doc, const ojson& schema, const ojson& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    return valid(doc, ref == "#" ? root : root.at(ojson::json_pointer(ref.substr(1))), root);
  }
  for (const char* k : {"anyOf", "oneOf"})
    if (schema.contains(k))
      return std::any_of(schema[k].begin(), schema[k].end(), [&](const ojson& s) { return valid(doc, s, root); });
  if (schema.contains("const") && doc != schema["const"]) return false;
  if (schema.contains("enum") && std::find(schema["enum"].begin(), schema["enum"].end(), doc) == schema["enum"].end())
    return false;
  if (schema.contains("type")) {
    const ojson& t = schema["type"];
    const bool ok = t.is_string() ? of_type(doc, t.get<std::string>())
                                  : std::any_of(t.begin(), t.end(), [&](const ojson& x) { return of_type(doc, x.get<std::string>()); });
    if (!ok) return false;
  }
  if (doc.is_object()) {
    for (const auto& r : schema.value("required", ojson::array()))
      if (!doc.contains(r.get<std::string>())) return false;
    const ojson props = schema.value("properties", ojson::object());
    for (const auto& [key, value] : doc.items()) {
      if (props.contains(key)) {
        if (!valid(value, props[key], root)) return false;
      } else if (schema.contains("additionalProperties") && !valid(value, schema["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (doc.is_array()) {
    if (doc.size() < schema.value("minItems", size_t(0)) || doc.size() > schema.value("maxItems", SIZE_MAX)) return false;
    if (schema.contains("items"))
      for (const ojson& item : doc)
        if (!valid(item, schema["items"], root)) return false;
  }
  if (doc.is_string()) {
    const size_t n = code_points(doc.get<std::string>());
    if (n < schema.value("minLength", size_t(0)) || n > schema.value("maxLength", SIZE_MAX)) return false;
  }
  return true;
}

TEST(JsonConstraint, SampledRepliesAreValidUnderEverySampler) {
  std::vector<SamplingOptions> samplers(6);
  samplers[1].temperature = 1.5f, samplers[1].sample = true;
  samplers[2].temperature = 0.8f, samplers[2].top_k = 5, samplers[2].sample = true;
  samplers[3].temperature = 1.f, samplers[3].top_p = 0.3f, samplers[3].sample = true;
  samplers[4].temperature = 2.f, samplers[4].min_p = 0.5f, samplers[4].sample = true;
  samplers[5].repetition_penalty = 1.3f, samplers[5].presence_penalty = 2.f, samplers[5].frequency_penalty = -2.f;
  int whole = 0, runs = 0;
  for (const char* schema : {kPerson, kTree, kShapes, R"({"type": "object"})", R"({"type": "array", "items": {"type": "string"}, "minItems": 2})"}) {
    const ojson parsed = ojson::parse(schema);
    for (size_t si = 0; si < samplers.size(); ++si) {
      for (uint32_t seed = 0; seed < 3; ++seed) {
        const TestVocabulary v = test_vocabulary(seed);
        auto g = std::make_shared<const JsonGrammar>(grammar(schema));
        JsonConstraint c(g, TokenTrie::from_texts(v.texts, v.usable), v.stops);
        SamplingOptions o = samplers[si];
        o.seed = seed;
        Sampler sampler(o);
        std::mt19937 rng(seed + 100 * uint32_t(si));
        std::normal_distribution<float> noise(0.f, 3.f);
        std::string text;
        std::vector<int> tokens;
        bool stopped = false;
        for (int step = 0; step < 400 && !stopped; ++step) {
          std::vector<float> logits(v.texts.size());
          for (float& l : logits) l = noise(rng);
          logits[size_t(v.stops[0])] += 4.f;  // the end is likely as soon as it is allowed
          const int t = sampler.choose(logits, tokens, tokens, &c);
          ASSERT_GE(t, 0) << schema << ": no allowed token after " << text;
          tokens.push_back(t);
          if (std::find(v.stops.begin(), v.stops.end(), t) != v.stops.end()) {
            stopped = true;
            break;
          }
          c.accept(t);
          text += v.texts[size_t(t)];
        }
        ++runs;
        if (!stopped) continue;  // the budget ran out mid-document, as max_tokens does
        ++whole;
        ojson doc;
        ASSERT_NO_THROW(doc = ojson::parse(text)) << schema << " sampler " << si << ": " << text;
        EXPECT_TRUE(valid(doc, parsed, parsed)) << schema << " sampler " << si << ": " << text;
      }
    }
  }
  EXPECT_GT(whole, runs / 2) << "most runs should end in a whole document";
}

TEST(JsonConstraint, GreedyTakesTheAllowedTokenOfHighestLogit) {
  const TestVocabulary v = test_vocabulary(1);
  auto g = std::make_shared<const JsonGrammar>(grammar(kPerson));
  JsonConstraint c(g, TokenTrie::from_texts(v.texts, v.usable), v.stops);
  Sampler greedy(SamplingOptions{});
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.f, 1.f);
  for (int step = 0; step < 30; ++step) {
    std::vector<float> logits(v.texts.size());
    for (float& l : logits) l = noise(rng);
    std::vector<float> masked = logits;
    c.mask(masked);
    const int want = int(std::max_element(masked.begin(), masked.end()) - masked.begin());
    std::vector<float> row = logits;
    const int got = greedy.choose(row, {}, {}, &c);
    ASSERT_EQ(got, want);
    EXPECT_EQ(row, logits);  // the mask went to a copy: log probabilities stay the model's
    if (std::find(v.stops.begin(), v.stops.end(), got) != v.stops.end()) break;
    c.accept(got);
  }
}

TEST(JsonConstraint, AWholeDocumentWithNoStopTokenEndsTheReply) {
  const TestVocabulary v = test_vocabulary(2);
  auto g = std::make_shared<const JsonGrammar>(grammar(R"({"type": "boolean"})"));
  JsonConstraint c(g, TokenTrie::from_texts(v.texts, v.usable), {});
  const int t_true = int(std::find(v.texts.begin(), v.texts.end(), "true") - v.texts.begin());
  ASSERT_TRUE(c.allows(t_true));
  c.accept(t_true);
  EXPECT_TRUE(c.complete());
  std::vector<float> logits(v.texts.size(), 0.f);
  Sampler greedy(SamplingOptions{});
  EXPECT_EQ(greedy.choose(logits, {}, {}, &c), -1);  // the step generator ends the request as at a stop token
}

TEST(TokenTrie, ReadsEachTokensTextAsItIsWrittenMidReply) {
  const auto tok = Tokenizer::open_dir(test::tiny_model_dir("tiny-gemma3"));
  ASSERT_TRUE(tok);
  const auto trie = TokenTrie::build(*tok, tok->piece_count() + 5);
  int texts = 0;
  for (int t = 0; t < tok->piece_count(); ++t) {
    const std::string* text = trie->text(t);
    if (tok->is_special(t)) {
      EXPECT_EQ(text, nullptr) << tok->piece(t);
      continue;
    }
    if (!text) continue;
    ++texts;
    const std::string piece = tok->piece(t);
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0) {
      EXPECT_EQ(text->size(), 1u) << piece;
      continue;
    }
    // Between two text tokens a token writes exactly its text.
    const int a = tok->piece_id("a");
    ASSERT_GE(a, 0);
    EXPECT_EQ(tok->decode({a, t, a}), "a" + *text + "a") << piece;
  }
  EXPECT_GT(texts, tok->piece_count() / 2);
  EXPECT_EQ(trie->text(tok->piece_count() + 1), nullptr);  // past the tokenizer's pieces
  for (const char* name : {"<start_of_turn>", "<end_of_turn>", "<start_of_image>"}) {
    const int id = tok->piece_id(name);
    ASSERT_GE(id, 0) << name;
    EXPECT_TRUE(tok->is_special(id)) << name;
  }
  // Every byte a JSON document needs is one token's whole text.
  for (char c : std::string("{}[]\":,0123456789-.eE\\ntrufalse ")) {
    bool found = false;
    for (int t = 0; t < tok->piece_count() && !found; ++t) found = trie->text(t) && *trie->text(t) == std::string(1, c);
    EXPECT_TRUE(found) << "'" << c << "'";
  }
}

}  // namespace
}  // namespace splitdec
