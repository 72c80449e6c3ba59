// A Hugging Face tokenizer.json, read natively: the parts Gemma's files use
// (Replace normalizers, a Split pre-tokenizer on a string, BPE with byte
// fallback, Replace/ByteFallback/Fuse/Strip decoders, added tokens). Anything
// else in the file is a FormatError that names the field and its value, and
// so is a file past a bound of hf_tokenizer_limits.h (sizes, counts, ids,
// chain lengths, text growth).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace splitdec {

class HfTokenizer {
 public:
  static std::unique_ptr<HfTokenizer> open(const std::string& path);
  // `source` names the file in errors.
  static std::unique_ptr<HfTokenizer> from_json(std::string_view json, const std::string& source);
  ~HfTokenizer();

  // Text to ids without special tokens around it (no <bos>); added tokens
  // written in the text become their ids, as with HF's encode.
  std::vector<int> encode(std::string_view text) const;
  // HF's decode with skip_special_tokens=False; an id outside [0,
  // piece_count()) is an InputError, one with no piece is skipped.
  std::string decode(const std::vector<int>& ids) const;
  int piece_count() const;
  // -1 when the piece is unknown.
  int piece_id(std::string_view piece) const;
  // "" for an id that has no piece.
  const std::string& piece(int id) const;
  // An added token marked "special" (control tokens: <bos>, <start_of_turn>, ...).
  bool is_special(int id) const;

 private:
  HfTokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec
