#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/hf_added_tokens.h"
#include "tokenizer/hf_bpe.h"
#include "tokenizer/hf_tokenizer_limits.h"
#include "tokenizer/hf_utf8.h"

namespace splitdec {

using nlohmann::json;

namespace {

struct DecodeStep {
  enum Kind { kReplace, kByteFallback, kFuse, kStrip } kind;
  std::string from, to;  // kReplace
  uint32_t strip = 0;    // kStrip: the scalar, and how many at most from each end
  size_t start = 0, stop = 0;
};

[[noreturn]] void unsupported(const std::string& source, const std::string& field, const json& value) {
  throw FormatError(source + ": " + field + " " + value.dump() + " is not supported");
}

const json& member(const json& object, const char* key, const std::string& source, const std::string& where) {
  if (!object.is_object() || !object.contains(key))
    throw FormatError(source + ": " + where + " has no \"" + key + "\"");
  return object.at(key);
}

std::string limit_text(const char* name, int64_t value) { return name + std::string(" = ") + std::to_string(value); }

// A string that goes into a pattern or a replacement: at most kMaxPatternBytes.
std::string bounded_string(const json& s, const std::string& source, const std::string& field) {
  std::string text = s.get<std::string>();
  if (text.size() > hf::kMaxPatternBytes)
    throw FormatError(source + ": " + field + " is " + std::to_string(text.size()) + " bytes, more than the limit (" +
                      limit_text("kMaxPatternBytes", int64_t(hf::kMaxPatternBytes)) + ")");
  return text;
}

// {"String": s} patterns only: Regex patterns would need a regex engine
// that matches Rust's (onig/fancy-regex) exactly.
std::string string_pattern(const json& p, const std::string& source, const std::string& field) {
  if (p.is_object() && p.size() == 1 && p.contains("String") && p["String"].is_string() &&
      !p["String"].get<std::string>().empty())
    return bounded_string(p["String"], source, field);
  unsupported(source, field, p);
}

// An integer field, range-checked before any conversion: nlohmann's get<int>
// would silently wrap 2^40 to 0.
int64_t bounded_integer(const json& v, int64_t lo, int64_t hi, const std::string& source, const std::string& what,
                        const std::string& limit) {
  bool in_range = false;
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    in_range = hi >= 0 && u <= uint64_t(hi) && int64_t(u) >= lo;
    x = in_range ? int64_t(u) : 0;
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
    in_range = x >= lo && x <= hi;
  }
  if (!in_range)
    throw FormatError(source + ": " + what + " " + v.dump() + " is not an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "] (" + limit + ")");
  return x;
}

// A token id: its table is allocated up to the largest id.
int token_id(const json& v, const std::string& source, const std::string& what) {
  return int(bounded_integer(v, 0, hf::kMaxVocabularySize - 1, source, what,
                             "ids lie below " + limit_text("kMaxVocabularySize", hf::kMaxVocabularySize)));
}

void check_count(size_t count, size_t limit, const char* limit_name, const std::string& source,
                 const std::string& field, const char* what) {
  if (count > limit)
    throw FormatError(source + ": " + field + " holds " + std::to_string(count) + " " + what +
                      ", more than the limit (" + limit_text(limit_name, int64_t(limit)) + ")");
}

// One step of a chain (normalizer or decoder), counted as it is parsed.
void count_step(size_t* steps, size_t limit, const char* limit_name, const std::string& source,
                const std::string& field) {
  if (++*steps > limit)
    throw FormatError(source + ": " + field + " has more than " + std::to_string(limit) + " steps (" +
                      limit_text(limit_name, int64_t(limit)) + ", Sequence nodes included)");
}

// A Replace step multiplies the worst-case text length by max(1, |to| / |from|).
void add_growth(double* growth, const std::string& from, const std::string& to, const std::string& source,
                const std::string& field) {
  *growth *= std::max(1.0, double(to.size()) / double(from.size()));
  if (*growth > hf::kMaxTextGrowth) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", hf::kMaxTextGrowth);
    throw FormatError(source + ": the Replace steps of " + field + " can grow text more than " + text +
                      " times (kMaxTextGrowth = " + text + "; growth is the product of content / pattern lengths)");
  }
}

bool flag(const json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? fallback : it->get<bool>();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

struct HfTokenizer::Impl {
  std::vector<std::pair<std::string, std::string>> normalizer;  // Replace steps in order
  std::string split_on;                                         // "": no pre-tokenizer
  std::unique_ptr<hf::Bpe> bpe;
  std::vector<hf::AddedToken> added;
  hf::AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unordered_map<std::string, int> added_ids;
  std::vector<std::string> pieces;
  std::vector<bool> has_piece;
  std::vector<bool> special;  // by id: a special added token
  bool has_decoder = false;
  std::vector<DecodeStep> decoders;
  // Counted while parsing, for the limits.
  size_t normalizer_steps = 0, decoder_steps = 0;
  double normalizer_growth = 1, decoder_growth = 1;

  void parse_normalizer(const json& n, const std::string& source);
  void parse_decoder(const json& d, const std::string& source);
  std::string normalize(std::string_view text) const;
  void encode_text(std::string_view text, std::vector<int>* out) const;
};

void HfTokenizer::Impl::parse_normalizer(const json& n, const std::string& source) {
  count_step(&normalizer_steps, hf::kMaxNormalizerSteps, "kMaxNormalizerSteps", source, "normalizer");
  const std::string type = member(n, "type", source, "normalizer").get<std::string>();
  if (type == "Replace") {
    normalizer.emplace_back(string_pattern(member(n, "pattern", source, "normalizer"), source, "normalizer.pattern"),
                            bounded_string(member(n, "content", source, "normalizer"), source, "normalizer.content"));
    add_growth(&normalizer_growth, normalizer.back().first, normalizer.back().second, source, "normalizer");
  } else if (type == "Sequence") {
    for (const auto& step : member(n, "normalizers", source, "normalizer")) parse_normalizer(step, source);
  } else {
    unsupported(source, "normalizer.type", n["type"]);
  }
}

void HfTokenizer::Impl::parse_decoder(const json& d, const std::string& source) {
  count_step(&decoder_steps, hf::kMaxDecoderSteps, "kMaxDecoderSteps", source, "decoder");
  const std::string type = member(d, "type", source, "decoder").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : member(d, "decoders", source, "decoder")) parse_decoder(step, source);
  } else if (type == "Replace") {
    DecodeStep s{DecodeStep::kReplace, {}, {}, 0, 0, 0};
    s.from = string_pattern(member(d, "pattern", source, "decoder"), source, "decoder.pattern");
    s.to = bounded_string(member(d, "content", source, "decoder"), source, "decoder.content");
    add_growth(&decoder_growth, s.from, s.to, source, "decoder");
    decoders.push_back(std::move(s));
  } else if (type == "ByteFallback") {
    decoders.push_back({DecodeStep::kByteFallback, {}, {}, 0, 0, 0});
  } else if (type == "Fuse") {
    decoders.push_back({DecodeStep::kFuse, {}, {}, 0, 0, 0});
  } else if (type == "Strip") {
    const std::string content = bounded_string(member(d, "content", source, "decoder"), source, "decoder.content");
    size_t len = 0;
    if (content.empty() || (hf::utf8_decode(content, 0, &len), len != content.size()))
      unsupported(source, "decoder.content", d["content"]);
    DecodeStep s{DecodeStep::kStrip, {}, {}, hf::utf8_decode(content, 0, &len), 0, 0};
    const std::string strip_limit = limit_text("kMaxStripCount", hf::kMaxStripCount);
    s.start = size_t(bounded_integer(member(d, "start", source, "decoder"), 0, hf::kMaxStripCount, source,
                                     "decoder.start", strip_limit));
    s.stop = size_t(bounded_integer(member(d, "stop", source, "decoder"), 0, hf::kMaxStripCount, source, "decoder.stop",
                                    strip_limit));
    decoders.push_back(std::move(s));
  } else {
    unsupported(source, "decoder.type", d["type"]);
  }
}

HfTokenizer::HfTokenizer() : impl_(std::make_unique<Impl>()) {}
HfTokenizer::~HfTokenizer() = default;

std::unique_ptr<HfTokenizer> HfTokenizer::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open");
  // The size first: the whole file is read into memory.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw FormatError(path + ": cannot read (not a regular file)");
  if (uint64_t(size) > hf::kMaxTokenizerJsonBytes)
    throw FormatError(path + ": " + std::to_string(size) + " bytes, more than the limit for a tokenizer.json (" +
                      limit_text("kMaxTokenizerJsonBytes", int64_t(hf::kMaxTokenizerJsonBytes)) + ")");
  in.seekg(0, std::ios::beg);
  std::string text(size_t(size), '\0');
  if (!in.read(text.data(), size)) throw FormatError(path + ": cannot read");
  return from_json(text, path);
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_json(std::string_view text, const std::string& source) {
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  Impl& m = *t->impl_;
  if (text.size() > hf::kMaxTokenizerJsonBytes)
    throw FormatError(source + ": " + std::to_string(text.size()) +
                      " bytes, more than the limit for a tokenizer.json (" +
                      limit_text("kMaxTokenizerJsonBytes", int64_t(hf::kMaxTokenizerJsonBytes)) + ")");
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw FormatError(source + ": not a tokenizer.json object");

    if (j.contains("normalizer") && !j["normalizer"].is_null()) m.parse_normalizer(j["normalizer"], source);

    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
      const json& p = j["pre_tokenizer"];
      const json& type = member(p, "type", source, "pre_tokenizer");
      if (type != "Split") unsupported(source, "pre_tokenizer.type", type);
      m.split_on = string_pattern(member(p, "pattern", source, "pre_tokenizer"), source, "pre_tokenizer.pattern");
      const json& behavior = member(p, "behavior", source, "pre_tokenizer");
      if (behavior != "MergedWithPrevious") unsupported(source, "pre_tokenizer.behavior", behavior);
      if (flag(p, "invert", false)) unsupported(source, "pre_tokenizer.invert", p["invert"]);
    }

    const json& model = member(j, "model", source, "tokenizer.json");
    const json& type = member(model, "type", source, "model");
    if (type != "BPE") unsupported(source, "model.type", type);
    if (model.contains("dropout") && !model["dropout"].is_null()) unsupported(source, "model.dropout", model["dropout"]);
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() && model[key] != "")
        unsupported(source, std::string("model.") + key, model[key]);
    std::unordered_map<std::string, int> vocab;
    const json& vocab_json = member(model, "vocab", source, "model");
    if (!vocab_json.is_object()) unsupported(source, "model.vocab", json("(not an object)"));
    check_count(vocab_json.size(), size_t(hf::kMaxVocabularySize), "kMaxVocabularySize", source, "model.vocab",
                "pieces");
    vocab.reserve(vocab_json.size());
    int max_id = -1;
    for (const auto& [piece, id] : vocab_json.items()) {
      const int i = token_id(id, source, "model.vocab \"" + piece + "\": id");
      vocab.emplace(piece, i);
      max_id = std::max(max_id, i);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    const json& merges_json = member(model, "merges", source, "model");
    if (!merges_json.is_array()) unsupported(source, "model.merges", json("(not an array)"));
    check_count(merges_json.size(), hf::kMaxMerges, "kMaxMerges", source, "model.merges", "merges");
    merges.reserve(merges_json.size());
    for (const auto& mj : merges_json) {
      if (mj.is_array() && mj.size() == 2) {
        merges.emplace_back(mj[0].get<std::string>(), mj[1].get<std::string>());
      } else if (mj.is_string()) {
        // "a b": exactly one space, as HF's legacy merges format.
        const std::string s = mj.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) unsupported(source, "model.merges entry", mj);
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        unsupported(source, "model.merges entry", mj);
      }
    }
    hf::Bpe::Options options;
    options.byte_fallback = flag(model, "byte_fallback", false);
    options.fuse_unk = flag(model, "fuse_unk", false);
    options.ignore_merges = flag(model, "ignore_merges", false);
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const auto it = vocab.find(model["unk_token"].get<std::string>());
      if (it != vocab.end()) options.unk_id = it->second;
    }

    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      const json& added = j["added_tokens"];
      if (!added.is_array()) unsupported(source, "added_tokens", json("(not an array)"));
      check_count(added.size(), hf::kMaxAddedTokens, "kMaxAddedTokens", source, "added_tokens", "tokens");
      for (const auto& a : added) {
        hf::AddedToken token;
        token.content =
            bounded_string(member(a, "content", source, "added_tokens entry"), source, "added_tokens.content");
        token.id = token_id(member(a, "id", source, "added_tokens entry"), source,
                            "added_tokens entry \"" + token.content + "\": id");
        token.special = flag(a, "special", false);
        token.single_word = flag(a, "single_word", false);
        token.lstrip = flag(a, "lstrip", false);
        token.rstrip = flag(a, "rstrip", false);
        token.normalized = flag(a, "normalized", !token.special);
        max_id = std::max(max_id, token.id);
        m.added.push_back(std::move(token));
      }
    }

    m.pieces.assign(static_cast<size_t>(max_id + 1), std::string());
    m.has_piece.assign(m.pieces.size(), false);
    m.special.assign(m.pieces.size(), false);
    for (const auto& [piece, id] : vocab) m.pieces[static_cast<size_t>(id)] = piece, m.has_piece[static_cast<size_t>(id)] = true;
    // Added tokens win over the model's vocab for id -> text, as HF's id_to_token.
    for (size_t k = 0; k < m.added.size(); ++k) {
      const hf::AddedToken& a = m.added[k];
      m.pieces[static_cast<size_t>(a.id)] = a.content;
      m.has_piece[static_cast<size_t>(a.id)] = true;
      m.special[static_cast<size_t>(a.id)] = a.special;
      m.added_ids.emplace(a.content, a.id);
      // Normalized tokens are searched for in normalized text, so their
      // patterns are normalized too (HF's refresh_added_tokens).
      if (a.normalized) m.normalized_matcher.add(m.normalize(a.content), static_cast<int>(k));
      else m.raw_matcher.add(a.content, static_cast<int>(k));
    }
    m.bpe = std::make_unique<hf::Bpe>(std::move(vocab), merges, options, source);

    if (j.contains("decoder") && !j["decoder"].is_null()) {
      m.has_decoder = true;
      m.parse_decoder(j["decoder"], source);
    }
  } catch (const json::exception& e) {
    throw FormatError(source + ": not a valid tokenizer.json: " + e.what());
  }
  return t;
}

std::string HfTokenizer::Impl::normalize(std::string_view text) const {
  std::string s(text);
  for (const auto& [from, to] : normalizer) s = hf::replace_all(s, from, to);
  return s;
}

// Normalized text between added tokens: the pre-tokenizer's words through BPE.
void HfTokenizer::Impl::encode_text(std::string_view text, std::vector<int>* out) const {
  if (split_on.empty()) return bpe->encode_word(text, out);
  // Split with MergedWithPrevious: a delimiter joins the piece before it,
  // unless that piece is itself a delimiter (or there is none).
  std::vector<std::pair<size_t, size_t>> words;
  bool previous_match = false;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(split_on, pos)) != std::string_view::npos; pos = hit + split_on.size()) {
    if (hit > pos) words.emplace_back(pos, hit), previous_match = false;
    if (!previous_match && !words.empty()) words.back().second = hit + split_on.size();
    else words.emplace_back(hit, hit + split_on.size());
    previous_match = true;
  }
  if (pos < text.size()) words.emplace_back(pos, text.size());
  for (const auto& [b, e] : words) bpe->encode_word(text.substr(b, e - b), out);
}

std::vector<int> HfTokenizer::encode(std::string_view text) const {
  const Impl& m = *impl_;
  std::vector<int> ids;
  for (const auto& raw : m.raw_matcher.split(text, m.added)) {
    if (raw.token >= 0) {
      ids.push_back(m.added[static_cast<size_t>(raw.token)].id);
      continue;
    }
    const std::string normalized = m.normalize(text.substr(raw.begin, raw.end - raw.begin));
    for (const auto& piece : m.normalized_matcher.split(normalized, m.added)) {
      if (piece.token >= 0) ids.push_back(m.added[static_cast<size_t>(piece.token)].id);
      else m.encode_text(std::string_view(normalized).substr(piece.begin, piece.end - piece.begin), &ids);
    }
  }
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int>& ids) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int id : ids) {
    if (id < 0 || id >= piece_count())
      throw InputError("token id " + std::to_string(id) + " is outside the tokenizer's " + std::to_string(piece_count()) +
                       " pieces");
    if (m.has_piece[static_cast<size_t>(id)]) tokens.push_back(m.pieces[static_cast<size_t>(id)]);
  }
  if (!m.has_decoder) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) out += (k ? " " : "") + tokens[k];
    return out;
  }
  for (const DecodeStep& step : m.decoders) {
    switch (step.kind) {
      case DecodeStep::kReplace:
        for (auto& t : tokens) t = hf::replace_all(t, step.from, step.to);
        break;
      case DecodeStep::kByteFallback: {
        // A run of <0xXX> pieces is one UTF-8 string; when it is not valid
        // UTF-8, HF writes one U+FFFD per byte of the run.
        std::vector<std::string> next;
        std::string bytes;
        auto flush = [&] {
          if (bytes.empty()) return;
          if (hf::valid_utf8(bytes)) next.push_back(bytes);
          else
            for (size_t k = 0; k < bytes.size(); ++k) next.emplace_back("\xEF\xBF\xBD");
          bytes.clear();
        };
        for (auto& t : tokens) {
          const int hi = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' ? hex_digit(t[3]) : -1;
          const int lo = hi >= 0 ? hex_digit(t[4]) : -1;
          if (lo >= 0) {
            bytes += static_cast<char>(hi * 16 + lo);
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(next);
        break;
      }
      case DecodeStep::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecodeStep::kStrip:
        for (auto& t : tokens) {
          std::vector<std::pair<size_t, uint32_t>> scalars;  // (offset, scalar)
          for (size_t i = 0, len = 0; i < t.size(); i += len) scalars.emplace_back(i, hf::utf8_decode(t, i, &len));
          size_t first = 0, last = scalars.size();
          while (first < step.start && first < scalars.size() && scalars[first].second == step.strip) ++first;
          for (size_t k = 0; k < step.stop && last > first && scalars[last - 1].second == step.strip; ++k) --last;
          const size_t b = first < scalars.size() ? scalars[first].first : t.size();
          const size_t e = last < scalars.size() ? scalars[last].first : t.size();
          t = t.substr(b, e > b ? e - b : 0);
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

bool HfTokenizer::is_special(int id) const {
  return id >= 0 && size_t(id) < impl_->special.size() && impl_->special[size_t(id)];
}

int HfTokenizer::piece_count() const { return static_cast<int>(impl_->pieces.size()); }

int HfTokenizer::piece_id(std::string_view piece) const {
  const std::string key(piece);
  if (const auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
  const auto& vocab = impl_->bpe->vocab();
  const auto it = vocab.find(key);
  return it == vocab.end() ? -1 : it->second;
}

const std::string& HfTokenizer::piece(int id) const {
  if (id < 0 || id >= piece_count())
    throw InputError("token id " + std::to_string(id) + " is outside the tokenizer's " + std::to_string(piece_count()) +
                     " pieces");
  return impl_->pieces[static_cast<size_t>(id)];
}

}  // namespace splitdec
