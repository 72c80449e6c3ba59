// What the public API's classes share inside the library: the engine's
// parts, and the conversions between public options and internal ones.
#pragma once

#include <memory>

#include "generate/generator.h"
#include "io/tokenizer.h"
#include "model/gemma_model.h"
#include "pipeline/session.h"
#include "splitdec/splitdec.h"

namespace splitdec {

struct Engine::Impl {
  Model model;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the directory has none
};

namespace api {

SessionOptions session_options(const ConversationOptions& o, int sequences);
SamplingOptions sampling_options(const GenerateOptions& o);
PromptBatch to_prompt_batch(const TokenInputs& in, const ModelConfig& config);
TokenInputs to_token_inputs(const PromptBatch& p);
std::vector<TraceStep> to_trace(const std::vector<TraceEntry>& trace);
std::string describe_memory(const Session& s);
const Tokenizer& require_tokenizer(const Engine& e, const char* what);

}  // namespace api
}  // namespace splitdec
