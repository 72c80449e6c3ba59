// `splitdec bench` rows for structured output: what a response_format costs
// per token with a full-size vocabulary (the trie's build, one token's check
// and the whole-vocabulary mask, at several places in a document).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace splitdec::bench {

// `tokenizer_dir`: a folder with tokenizer.json or tokenizer.model (a real
// Gemma tokenizer, or make-model's 262144-piece preset one).
nlohmann::json structured_output(const std::string& tokenizer_dir, bool quick);

}  // namespace splitdec::bench
