// Chat messages -> the prompt's tokens and media rows, through the
// checkpoint's own chat template and the family's media expansion
// (prompt/chat_prompt.h), exactly what `generate --messages` feeds.
#pragma once

#include <vector>

#include "model/prompt_batch.h"
#include "serve/chat_message.h"

namespace splitdec {
struct ModelConfig;
class Tokenizer;
class ChatTemplate;
}  // namespace splitdec

namespace splitdec::serve {

// Throws ApiError 400 (param "messages") for an unknown role, roles out of
// order, media in a system or assistant message, a last message that is not
// the user's, or anything the template or the media expansion refuses.
// With `tools` (and tool_choice not "none"): the template gets them, an
// assistant's tool_calls go to it with their arguments as JSON, and each
// "tool" message after them becomes one of that assistant message's
// tool_responses ({name, response}), as Gemma-4's template reads them (a
// template that never mentions tools is a 400). tool_choice "required" /
// a named function: the reply is made to start with a call (tool_reply_prefix).
PromptBatch chat_prompt(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer, const ModelConfig& config,
                        const ChatTemplate& chat_template, const ToolUse& tools = {});

// The text a reply is made to start with for `tools`' tool_choice ("" unless
// it must call a tool).
std::string tool_reply_prefix(const ToolUse& tools);

// A plain completion prompt: BOS and the text, no chat form.
PromptBatch text_prompt(const std::string& text, const Tokenizer& tokenizer, const ModelConfig& config);

}  // namespace splitdec::serve
