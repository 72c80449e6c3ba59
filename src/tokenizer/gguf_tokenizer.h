// The tokenizer a GGUF file carries in its tokenizer.* metadata, so that a
// GGUF alone is a complete model. A SentencePiece-style vocabulary
// (tokenizer.ggml.model "llama": pieces, scores, token types) becomes the
// BPE merges that reproduce its encoding, exactly as a folder's
// tokenizer.json is made from its tokenizer.model (gemma_tokenizer_json.h),
// and is read by the same tokenizer.json reader; a "gpt2" vocabulary brings
// its merges (tokenizer.ggml.merges).
#pragma once

#include <memory>

#include "tokenizer/gemma_tokenizer_json.h"

namespace splitdec {

class GgufFile;
class Tokenizer;

// The vocabulary: FormatError naming the key for a missing or inconsistent
// one (counts that differ, an unknown token type, a model other than llama / gpt2).
BpeVocabulary gguf_vocabulary(const GgufFile& file);
std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& file);

// llama.cpp's token types (tokenizer.ggml.token_type), as the file stores them.
enum class GgufTokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

}  // namespace splitdec
