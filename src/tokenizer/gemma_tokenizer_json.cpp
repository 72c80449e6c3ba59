#include "tokenizer/gemma_tokenizer_json.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.h"

namespace splitdec {

int BpeVocabulary::add(std::string piece, Kind kind) {
  pieces.push_back(std::move(piece));
  kinds.push_back(kind);
  return int(pieces.size()) - 1;
}

std::string gemma_tokenizer_json(const BpeVocabulary& v) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  auto added_token = [](int id, const std::string& content, bool special) {
    return ordered_json{{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
                        {"rstrip", false},    {"normalized", false}, {"special", special}};
  };
  for (int id = 0; id < v.size(); ++id) {
    const auto kind = v.kinds[size_t(id)];
    if (kind == BpeVocabulary::Kind::Special || kind == BpeVocabulary::Kind::Added)
      added.push_back(added_token(id, v.pieces[size_t(id)], kind == BpeVocabulary::Kind::Special));
  }
  for (const auto& [id, content] : v.extra_special) added.push_back(added_token(id, content, true));
  j["added_tokens"] = std::move(added);
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", ordered_json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", ordered_json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                    {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 1}}}},
                                    {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
      {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {2}}, {"tokens", {"<bos>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", ordered_json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                                    {{"type", "ByteFallback"}},
                                                    {{"type", "Fuse"}}})}};
  // The vocabulary and merges are written by hand: an ordered_json object
  // inserts in linear time, and 262144 pieces would take minutes.
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", "<unk>"},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", "@VOCAB@"},
                {"merges", "@MERGES@"}};
  std::string vocab = "{", merges = "[";
  for (int id = 0; id < v.size(); ++id) {
    if (v.pieces[size_t(id)].empty()) continue;
    if (vocab.size() > 1) vocab += ',';
    vocab += nlohmann::json(v.pieces[size_t(id)]).dump() + ':' + std::to_string(id);
  }
  for (const auto& [l, r] : v.merges) {
    if (merges.size() > 1) merges += ',';
    merges += '[' + nlohmann::json(l).dump() + ',' + nlohmann::json(r).dump() + ']';
  }
  std::string text = j.dump();
  text.replace(text.find("\"@VOCAB@\""), 9, vocab + '}');
  text.replace(text.find("\"@MERGES@\""), 10, merges + ']');
  return text;
}

BpeVocabulary bpe_vocabulary_from_sentencepiece(const std::string& serialized, const std::vector<std::string>& user_defined) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(serialized).ok()) throw FormatError("tokenizer.model: not a SentencePiece model");
  const std::set<std::string> defined(user_defined.begin(), user_defined.end());
  BpeVocabulary v;
  std::vector<float> scores;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    std::string piece = sp.IdToPiece(id);
    auto kind = BpeVocabulary::Kind::Normal;
    if (sp.IsControl(id) || sp.IsUnknown(id) || defined.count(piece)) kind = BpeVocabulary::Kind::Special;
    else if (sp.IsUnused(id)) kind = BpeVocabulary::Kind::Added;
    else if (sp.IsByte(id)) kind = BpeVocabulary::Kind::Byte;
    v.add(std::move(piece), kind);
    scores.push_back(sp.GetScore(id));
  }
  derive_merges(v, scores);
  return v;
}

void derive_merges(BpeVocabulary& v, const std::vector<float>& scores) {
  std::unordered_map<std::string, int> ids;
  for (int id = 0; id < v.size(); ++id)
    if (v.kinds[size_t(id)] == BpeVocabulary::Kind::Normal) ids.emplace(v.pieces[size_t(id)], id);
  // Every split of a normal piece into two normal pieces is a merge; a higher
  // score merges first, ties by the ids of the halves (transformers' order).
  std::vector<std::tuple<float, int, int, size_t>> ranked;  // -score, left id, right id, split
  for (const auto& [piece, id] : ids)
    for (size_t k = 1; k < piece.size(); ++k) {
      auto l = ids.find(piece.substr(0, k)), r = ids.find(piece.substr(k));
      if (l != ids.end() && r != ids.end()) ranked.emplace_back(-scores[size_t(id)], l->second, r->second, k);
    }
  std::sort(ranked.begin(), ranked.end());
  v.merges.clear();
  for (const auto& [score, l, r, k] : ranked) v.merges.emplace_back(v.pieces[size_t(l)], v.pieces[size_t(r)]);
}

}  // namespace splitdec
