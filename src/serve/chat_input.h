// Chat messages -> the prompt's tokens and media rows: the one place where
// the chat form is applied, so that the checkpoint's own template can
// replace the hard-coded Gemma form here without touching the server.
#pragma once

#include <vector>

#include "model/prompt_batch.h"
#include "serve/chat_message.h"

namespace splitdec {
struct ModelConfig;
class Tokenizer;
}  // namespace splitdec

namespace splitdec::serve {

// Gemma form: BOS, then user turns and the model's replies alternating; a
// system message (first only) goes before the first user text, as Gemma-3's
// template does; the prompt ends with the model's reply header. Throws
// ApiError 400 (param "messages") for an unknown role, roles out of order,
// media in a system or assistant message, or a last message that is not the user's.
PromptBatch chat_prompt(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer, const ModelConfig& config);

// A plain completion prompt: BOS and the text, no chat form.
PromptBatch text_prompt(const std::string& text, const Tokenizer& tokenizer, const ModelConfig& config);

}  // namespace splitdec::serve
