// Writing a tokenizer.json in the structure of Google's Gemma files (a
// Replace normalizer, the Split pre-tokenizer merged with the previous piece,
// BPE with byte fallback, the Replace/ByteFallback/Fuse decoder and a <bos>
// template post-processor). make-model writes its presets' tokenizers this
// way, so a preset folder reads like a downloaded checkpoint.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace splitdec {

struct BpeVocabulary {
  // Normal: reached by merges. Byte: <0xNN> fallback. Special: an added token
  // HF marks special (control). Added: an added token that is not special
  // (Gemma's <unusedN>, whitespace runs).
  enum class Kind { Normal, Byte, Special, Added };
  std::vector<std::string> pieces;  // by id; "" for an id with no piece
  std::vector<Kind> kinds;          // by id
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  // Added tokens past the model's vocabulary (Gemma-3's <image_soft_token>
  // is id 262144 of a 262144-piece model).
  std::vector<std::pair<int, std::string>> extra_special;

  int add(std::string piece, Kind kind);  // appends; returns the id
  int size() const { return int(pieces.size()); }
};

std::string gemma_tokenizer_json(const BpeVocabulary& vocabulary);

// A SentencePiece BPE model's pieces and the merges that reproduce its
// encoding, as transformers' converter derives them: every split of a piece
// into two pieces is a merge, ranked by the merged piece's score. Pieces named
// in `user_defined` become special added tokens.
BpeVocabulary bpe_vocabulary_from_sentencepiece(const std::string& serialized_model,
                                                const std::vector<std::string>& user_defined);

// Sets v.merges from the pieces' SentencePiece scores (by id), as above:
// what a vocabulary of pieces and scores (a GGUF's) needs to encode as BPE.
void derive_merges(BpeVocabulary& v, const std::vector<float>& scores);

}  // namespace splitdec
