#include "tokenizer/gguf_tokenizer.h"

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/hf_utf8.h"
#include "tokenizer/tokenizer.h"

namespace splitdec {

BpeVocabulary gguf_vocabulary(const GgufFile& f) {
  auto fail = [&](const std::string& key, const std::string& what) { throw FormatError(f.name() + ": metadata '" + key + "' " + what); };
  const std::string model = f.string("tokenizer.ggml.model").value_or("");
  if (model.empty()) fail("tokenizer.ggml.model", "is missing: the file has no tokenizer");
  // gemma4: Gemma-4's converter writes the pieces as tokenizer.json has
  // them (spaces as U+2581, bytes as <0xXX>) and its merges, as gpt2 does.
  if (model != "llama" && model != "gpt2" && model != "gemma4")
    fail("tokenizer.ggml.model",
         "is '" + model + "' (llama, SentencePiece-style, and gpt2 / gemma4, BPE with merges, are read)");
  const std::vector<std::string_view> tokens = f.strings("tokenizer.ggml.tokens");
  if (tokens.empty()) fail("tokenizer.ggml.tokens", "is missing or empty");
  const std::vector<int64_t> types = f.integers("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != tokens.size())
    fail("tokenizer.ggml.token_type", "has " + std::to_string(types.size()) + " entries for " + std::to_string(tokens.size()) + " tokens");
  BpeVocabulary v;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t t = types.empty() ? int64_t(GgufTokenType::Normal) : types[id];
    BpeVocabulary::Kind kind = BpeVocabulary::Kind::Normal;
    switch (GgufTokenType(t)) {
      case GgufTokenType::Undefined:
      case GgufTokenType::Normal: break;
      case GgufTokenType::Unknown:
      case GgufTokenType::Control: kind = BpeVocabulary::Kind::Special; break;
      case GgufTokenType::UserDefined:
      case GgufTokenType::Unused: kind = BpeVocabulary::Kind::Added; break;
      case GgufTokenType::Byte: kind = BpeVocabulary::Kind::Byte; break;
      default: fail("tokenizer.ggml.token_type", "[" + std::to_string(id) + "] is " + std::to_string(t) + " (0 to 6 are defined)");
    }
    // Pieces become tokenizer.json strings: UTF-8 (bytes are <0xXX> pieces).
    if (!hf::valid_utf8(tokens[id])) fail("tokenizer.ggml.tokens", "[" + std::to_string(id) + "] is not valid UTF-8");
    std::string piece(tokens[id]);
    // The converter writes user-defined pieces pre-normalized (U+2581 as a
    // space); Gemma's pieces never hold a raw space, so this is undone exactly.
    if (GgufTokenType(t) == GgufTokenType::UserDefined && model != "gemma4")
      for (size_t at; (at = piece.find(' ')) != std::string::npos;) piece.replace(at, 1, "\xe2\x96\x81");
    v.add(std::move(piece), kind);
  }
  if (model == "llama") {
    const std::vector<double> scores = f.numbers("tokenizer.ggml.scores");
    if (scores.size() != tokens.size())
      fail("tokenizer.ggml.scores", "has " + std::to_string(scores.size()) + " entries for " + std::to_string(tokens.size()) + " tokens");
    derive_merges(v, std::vector<float>(scores.begin(), scores.end()));
  } else {
    if (!f.find("tokenizer.ggml.merges")) fail("tokenizer.ggml.merges", "is missing (a " + model + " vocabulary merges by them)");
    for (std::string_view m : f.strings("tokenizer.ggml.merges")) {
      // Split at the first space after the first byte, as llama.cpp does.
      if (!hf::valid_utf8(m)) fail("tokenizer.ggml.merges", "holds a merge that is not valid UTF-8");
      const size_t space = m.find(' ', 1);
      if (space == std::string_view::npos) fail("tokenizer.ggml.merges", "holds '" + std::string(m) + "', not two pieces split by a space");
      v.merges.emplace_back(std::string(m.substr(0, space)), std::string(m.substr(space + 1)));
    }
  }
  return v;
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f) {
  return Tokenizer::from_hf_json(gemma_tokenizer_json(gguf_vocabulary(f)), f.name() + " (tokenizer.* metadata)");
}

}  // namespace splitdec
