#include "tools/preset_vocabulary.h"

#include <map>
#include <string>
#include <unordered_set>

#include "core/error.h"

namespace splitdec {

FamilySpecialIds family_special_ids(PresetFamily family) {
  FamilySpecialIds s;
  if (family == PresetFamily::Gemma4) {
    // Gemma4Config's ids (docs: FRONTENDS.md); 256000 is <|audio> there.
    s.boi = 255999, s.image = 258880, s.eoi = 258882, s.video = 258884;
    s.boa = 256000, s.audio = 258881, s.eoa = 258883;
  }
  return s;
}

namespace {

using Kind = BpeVocabulary::Kind;

// The added tokens at their real ids. Strings not listed here in the added
// ranges become <unusedN> placeholders, as in the real files.
std::map<int, std::pair<std::string, Kind>> family_added_tokens(PresetFamily family) {
  const FamilySpecialIds s = family_special_ids(family);
  std::map<int, std::pair<std::string, Kind>> t = {
      {s.pad, {"<pad>", Kind::Special}}, {s.eos, {"<eos>", Kind::Special}}, {s.bos, {"<bos>", Kind::Special}},
      {s.unk, {"<unk>", Kind::Special}}, {4, {"<mask>", Kind::Added}},      {5, {"[multimodal]", Kind::Added}}};
  if (family == PresetFamily::Gemma3) {
    t[s.start_of_turn] = {"<start_of_turn>", Kind::Special};
    t[s.end_of_turn] = {"<end_of_turn>", Kind::Special};
    t[s.boi] = {"<start_of_image>", Kind::Special};
    t[s.eoi] = {"<end_of_image>", Kind::Special};
    t[s.image] = {"<image_soft_token>", Kind::Special};  // past the model's 262144 pieces, as in the real file
  } else {
    t[s.start_of_turn] = {"<|turn>", Kind::Special};
    t[s.end_of_turn] = {"<turn|>", Kind::Special};
    t[46] = {"<|tool>", Kind::Special};
    t[47] = {"<tool|>", Kind::Special};
    t[50] = {"<|tool_response>", Kind::Special};
    t[51] = {"<tool_response|>", Kind::Special};
    t[52] = {"<|\"|>", Kind::Special};
    t[100] = {"<|channel>", Kind::Special};
    t[101] = {"<channel|>", Kind::Special};
    t[s.boi] = {"<|image>", Kind::Special};
    t[s.image] = {"<|image|>", Kind::Special};
    t[s.eoi] = {"<image|>", Kind::Special};
    t[s.video] = {"<|video|>", Kind::Special};
    t[s.boa] = {"<|audio>", Kind::Special};
    t[s.audio] = {"<|audio|>", Kind::Special};
    t[s.eoa] = {"<audio|>", Kind::Special};
  }
  // Runs of newlines (1..31) and of U+2581 (2..31) are added tokens in both families.
  for (int n = 1; n <= 31; ++n) t[106 + n] = {std::string(size_t(n), '\n'), Kind::Added};
  std::string spaces = "\u2581";
  for (int n = 2; n <= 31; ++n) t[136 + n] = {spaces += "\u2581", Kind::Added};
  return t;
}

// Ids [0, kLowAdded) and [kHighAdded, size) are added tokens, then bytes
// follow the low range: the real files' layout.
constexpr int kLowAdded = 238;
constexpr int kHighAdded = 255968;

// The characters the synthetic pieces are spelled with, most frequent first.
const std::vector<std::string>& filler_alphabet() {
  static const std::vector<std::string> chars = [] {
    std::vector<std::string> c = {"\u2581"};
    for (char ch : std::string("etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ.,-'"))
      c.push_back(std::string(1, ch));
    return c;
  }();
  return chars;
}

}  // namespace

BpeVocabulary preset_vocabulary(PresetFamily family, const BpeVocabulary& trained, int size) {
  if (size <= kHighAdded + 1) throw InputError("preset vocabulary: size " + std::to_string(size) + " is below the family layout");
  const auto added = family_added_tokens(family);
  BpeVocabulary v;
  v.pieces.assign(size_t(size), "");
  v.kinds.assign(size_t(size), Kind::Added);
  int unused = 0;
  for (int id = 0; id < size; ++id) {
    if (id >= kLowAdded && id < kHighAdded) continue;
    auto it = added.find(id);
    if (it != added.end()) v.pieces[size_t(id)] = it->second.first, v.kinds[size_t(id)] = it->second.second;
    else v.pieces[size_t(id)] = "<unused" + std::to_string(unused++) + ">";
  }
  for (auto& [id, tok] : added)
    if (id >= size) v.extra_special.emplace_back(id, tok.first);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.pieces[size_t(kLowAdded + b)] = name;
    v.kinds[size_t(kLowAdded + b)] = Kind::Byte;
  }

  // Normal pieces: the trained ones (with their merges), then the alphabet,
  // then synthetic pieces, each one merge (prefix, last char) from a shorter one.
  std::unordered_set<std::string> have;
  for (const auto& p : v.pieces) have.insert(p);
  int next = kLowAdded + 256;
  auto put = [&](const std::string& piece) {
    if (next >= kHighAdded || !have.insert(piece).second) return false;
    v.pieces[size_t(next)] = piece;
    v.kinds[size_t(next)] = Kind::Normal;
    ++next;
    return true;
  };
  for (int id = 0; id < trained.size(); ++id)
    if (trained.kinds[size_t(id)] == Kind::Normal) put(trained.pieces[size_t(id)]);
  v.merges = trained.merges;
  for (const auto& c : filler_alphabet()) put(c);
  std::vector<std::string> level = filler_alphabet();
  while (next < kHighAdded && !level.empty()) {
    std::vector<std::string> longer;
    for (const auto& prefix : level)
      for (const auto& c : filler_alphabet()) {
        if (next >= kHighAdded) break;
        const std::string piece = prefix + c;
        if (c == "\u2581") continue;  // U+2581 starts a word; pieces never hold one inside
        if (put(piece)) v.merges.emplace_back(prefix, c);
        longer.push_back(piece);
      }
    level = std::move(longer);
  }
  if (next < kHighAdded) throw Error("preset vocabulary: ran out of synthetic pieces");
  return v;
}

}  // namespace splitdec
