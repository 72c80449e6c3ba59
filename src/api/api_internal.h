// What the public API's classes share inside the library: the engine's
// parts, and the conversions between public options and internal ones.
#pragma once

#include <memory>
#include <mutex>

#include "api/engine_parts.h"
#include "generate/generator.h"
#include "generate/json_schema.h"
#include "generate/token_trie.h"
#include "tokenizer/tokenizer.h"
#include "media/media_frontend.h"
#include "media/media_loader.h"
#include "model/gemma_model.h"
#include "pipeline/session.h"
#include "prompt/chat_prompt.h"
#include "splitdec/splitdec.h"

namespace splitdec {

struct Engine::Impl {
  Model model;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the directory has none
  std::unique_ptr<ChatTemplate> chat_template;  // the folder's, or the family's built-in
  std::shared_ptr<const MediaFrontend> frontend;  // the checkpoint's image / audio frontends (maybe none)
  // The vocabulary's texts for structured output, built on first use.
  struct LazyVocabulary {
    std::once_flag once;
    std::shared_ptr<const TokenTrie> trie;
  };
  std::shared_ptr<LazyVocabulary> vocabulary = std::make_shared<LazyVocabulary>();
};

namespace api {

// GenerateOptions::json_schema compiled (null when empty); InputError naming the keyword.
std::shared_ptr<const JsonGrammar> json_grammar(const GenerateOptions& o);

SessionOptions session_options(const ConversationOptions& o, int sequences);
SamplingOptions sampling_options(const GenerateOptions& o);
PromptBatch to_prompt_batch(const TokenInputs& in, const ModelConfig& config);
TokenInputs to_token_inputs(PromptBatch p);  // by value: a temporary's rows move
std::vector<TraceStep> to_trace(const std::vector<TraceEntry>& trace);
std::string describe_memory(const Session& s);
const Tokenizer& require_tokenizer(const Engine& e, const char* what);
// The engine's chat prompter (needs a tokenizer).
ChatPrompter prompter(const Engine& e, const char* what, const MediaOptions& media = {});
// Reads media files for the engine's model with the given options.
MediaLoader media_loader(const Engine& e, const MediaOptions& media);
// A ChatTurn as messages: system, then user (media parts, then text).
std::vector<ChatMessage> turn_messages(const ChatTurn& turn);

}  // namespace api
}  // namespace splitdec
