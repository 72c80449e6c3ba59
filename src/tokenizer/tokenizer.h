// A model directory's tokenizer: tokenizer.json (Hugging Face, read natively)
// when present, as HF's fast tokenizer prefers it, else SentencePiece's
// tokenizer.model.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace splitdec {

class Tokenizer {
 public:
  // Returns nullptr when the directory has neither tokenizer.json nor
  // tokenizer.model; a file that exists but cannot be parsed is a FormatError.
  // A GGUF file's path gives the tokenizer of its metadata (tokenizer/gguf_tokenizer.h).
  static std::unique_ptr<Tokenizer> open_dir(const std::string& dir);
  static std::unique_ptr<Tokenizer> from_serialized(const std::string& proto, const std::string& source);
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& json, const std::string& source);
  ~Tokenizer();

  // No <bos> is added. Special pieces written in the text become their ids
  // (SentencePiece: its user-defined symbols; tokenizer.json: its added tokens).
  std::vector<int> encode(const std::string& text) const;
  // Ids outside the tokenizer's pieces (a model vocab can be larger) decode
  // as "<id:N>" rather than silently vanishing.
  std::string decode(const std::vector<int>& ids) const;
  int piece_count() const;
  // -1 when the piece is unknown.
  int piece_id(const std::string& piece) const;
  std::string piece(int id) const;
  // A control token (<bos>, <start_of_turn>, an unused slot, ...) rather
  // than text: tokenizer.json's special added tokens, SentencePiece's
  // control, unknown and unused pieces and Gemma's special names.
  bool is_special(int id) const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The special pieces that make-model's tokenizers define: Gemma-3's names,
// and Gemma-4's (<|turn>, <|image>, <|image|> ...).
const std::vector<std::string>& gemma_special_pieces();
const std::vector<std::string>& gemma4_special_pieces();

// Trains a small SentencePiece BPE model (Gemma's tokenizer type) on `corpus` (deterministic for a seed)
// and returns the serialized model.
// `special`: the user-defined pieces (matched whole in text).
std::string train_tokenizer(const std::string& corpus, int vocab_size, unsigned seed,
                            const std::vector<std::string>& special = gemma_special_pieces());

}  // namespace splitdec
