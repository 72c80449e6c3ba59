#include "constraint_benchmarks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "generate/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace splitdec::bench {

using nlohmann::json;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A schema and a document of it; the mask is timed after prefixes of it:
// the start, inside a key, inside a string value, inside a number, in an
// array of objects, and at the end.
const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]}},
  "required": ["name", "age", "tags", "address"]})";
const char* kDocument =
    R"({"name": "Ada Lovelace", "age": 36, "tags": ["mathematics", "poetry"], "address": {"city": "London", "zip": "W1"}})";

}  // namespace

json structured_output(const std::string& tokenizer_dir, bool quick) {
  std::printf("\n== structured output: response_format cost per token (%s)\n", tokenizer_dir.c_str());
  const auto tok = Tokenizer::open_dir(tokenizer_dir);
  if (!tok) throw InputError(tokenizer_dir + ": no tokenizer.json or tokenizer.model");
  const int vocab = tok->piece_count();
  double t0 = now_s();
  const auto trie = TokenTrie::build(*tok, vocab);
  const double build_s = now_s() - t0;
  std::printf("vocabulary %d pieces, trie %zu nodes, built in %.2f s\n", vocab, trie->nodes().size(), build_s);
  auto grammar = std::make_shared<const JsonGrammar>(compile_json_schema(nlohmann::ordered_json::parse(kSchema), "schema"));
  const std::string doc = kDocument;
  const std::vector<std::pair<const char*, size_t>> places = {
      {"start", 0},
      {"in a key", doc.find("name") + 2},
      {"in a string value", doc.find("Lovelace")},
      {"in a number", doc.find("36") + 1},
      {"array of strings, after a comma", doc.find("\"poetry\"")},
      {"nested object, after a key", doc.find("\"London\"")},
      {"whole document", doc.size()}};
  json rows = json::array();
  std::printf("%-34s %10s %12s %14s\n", "place", "allowed", "mask ms", "one check us");
  std::mt19937 rng(1);
  for (const auto& [place, length] : places) {
    JsonConstraint c(grammar, trie, {1, 106});
    // The prefix as the tokenizer cuts it (a reply's tokens would be these).
    for (int t : tok->encode(doc.substr(0, length))) c.accept(t);
    std::vector<float> logits(size_t(vocab), 0.f);
    c.mask(logits);  // warm
    const int reps = quick ? 3 : 10;
    t0 = now_s();
    for (int r = 0; r < reps; ++r) {
      std::fill(logits.begin(), logits.end(), 0.f);
      c.mask(logits);
    }
    const double mask_ms = (now_s() - t0) / reps * 1e3;
    const int64_t allowed = std::count(logits.begin(), logits.end(), 0.f);
    // The check the sampler makes first: one token, usually the one it drew.
    const int checks = 20000;
    int64_t yes = 0;
    t0 = now_s();
    for (int k = 0; k < checks; ++k) yes += c.allows(int(rng() % uint32_t(vocab)));
    const double check_us = (now_s() - t0) / checks * 1e6;
    std::printf("%-34s %10lld %12.2f %14.3f\n", place, (long long)allowed, mask_ms, check_us);
    rows.push_back({{"place", place}, {"allowed", allowed}, {"mask_ms", mask_ms}, {"check_us", check_us}, {"allowed_checks", yes}});
  }
  return {{"tokenizer", tokenizer_dir}, {"vocabulary", vocab}, {"trie_nodes", trie->nodes().size()}, {"build_s", build_s},
          {"places", rows}};
}

}  // namespace splitdec::bench
