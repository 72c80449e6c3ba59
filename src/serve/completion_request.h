// The body of POST /v1/chat/completions or /v1/completions, parsed and
// checked: every field a client can get wrong is an ApiError 400 naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/sampler.h"
#include "io/generation_config.h"
#include "media/media_loader.h"
#include "model/prompt_batch.h"
#include "serve/chat_message.h"

namespace splitdec {
struct JsonGrammar;
struct ModelConfig;
class Tokenizer;
class ChatTemplate;
}  // namespace splitdec

namespace splitdec::serve {

struct CompletionRequest {
  bool chat = true;  // chat.completions (else completions)
  std::string model;
  PromptBatch prompt;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  std::optional<int64_t> max_tokens;  // none: as many as the sequence holds
  int choices = 1;  // n: replies to the prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int top_logprobs = -1;  // >= 0: each token's log probability with this many alternatives
  std::string echo;  // /v1/completions with echo: the prompt's text, written before the reply's
  std::shared_ptr<const JsonGrammar> json_grammar;  // response_format json_object / json_schema; null: text
  ToolUse tools;  // chat: tools and tool_choice
};

struct RequestContext {
  const Tokenizer& tokenizer;
  const ModelConfig& config;
  const ChatTemplate& chat_template;
  std::string media_dir;  // empty: file paths are refused
  const MediaLoader& media;  // images, audio and embeddings files to rows
  // Refused before any tokenizing or encoding: prompt text (the messages'
  // text parts, or a completion's prompt) longer than this cannot fit the
  // context (the server passes context x the longest piece's bytes x 2), and
  // more media parts than `max_media` in one request.
  size_t max_text_bytes = SIZE_MAX;
  size_t max_media = SIZE_MAX;
  GenerationDefaults defaults = {};  // sampling fields the request leaves out (then OpenAI's)
};

CompletionRequest parse_completion_request(const std::string& body, bool chat, const RequestContext& context);

}  // namespace splitdec::serve
