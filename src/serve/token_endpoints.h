// llama-server's POST /tokenize and POST /detokenize: text to the model's
// token ids and back, bounded by the same limits as a prompt. Every field a
// client can get wrong is an ApiError 400 naming it.
#pragma once

#include <cstddef>
#include <string>

namespace splitdec {
struct ModelConfig;
class Tokenizer;
}  // namespace splitdec

namespace splitdec::serve {

struct TokenEndpointContext {
  const Tokenizer& tokenizer;
  const ModelConfig& config;
  // Text longer than this cannot fit the context in any tokenization (the
  // server's prompt bound); /detokenize takes at most this many ids.
  size_t max_text_bytes = SIZE_MAX;
};

// {"content": "...", "add_special": false} -> {"tokens": [...]}; add_special
// puts the model's BOS first, as a prompt starts.
std::string tokenize_reply(const std::string& body, const TokenEndpointContext& context);
// {"tokens": [...]} -> {"content": "..."}; ids outside the vocabulary are refused.
std::string detokenize_reply(const std::string& body, const TokenEndpointContext& context);

}  // namespace splitdec::serve
