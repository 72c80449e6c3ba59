// The public Batch: sequences that move together turn by turn, through a
// session under any plan or through the reference (the oracle).
#include "splitdec/batch.h"

#include "api/api_internal.h"
#include "core/error.h"
#include "prompt/prompt_text.h"
#include "generate/reference_source.h"
#include "prompt/prompt_json.h"

namespace splitdec {

std::vector<TokenInputs> read_inputs_json(const std::string& path, const Engine& engine) {
  std::vector<TokenInputs> out;
  for (const Turn& t : read_turns_json(path, engine.impl().model.config(), -1)) {
    out.push_back(api::to_token_inputs(t.prompt));
    out.back().max_new_tokens = t.max_new_tokens;
  }
  return out;
}

struct Batch::Impl {
  std::shared_ptr<const Engine> engine;
  int sequences;
  std::unique_ptr<Session> session;  // null under the reference plan
  std::unique_ptr<LogitsSource> source;
  std::unique_ptr<Generator> generator;  // made by the first turn (it fixes the sampling options)
  BatchResult result;
};

Batch::Batch(std::shared_ptr<const Engine> engine, int sequences, ConversationOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& b = *impl_;
  b.engine = std::move(engine);
  b.sequences = sequences;
  const Model& model = b.engine->impl().model;
  if (sequences < 1) throw InputError("a batch needs at least one sequence, got " + std::to_string(sequences));
  if (options.plan == ExecutionPlan::Reference) {
    const MaskPolicy policy = options.policy.value_or(model.config().default_policy);
    b.source = std::make_unique<ReferenceSource>(model, policy, options.max_length);
  } else {
    b.session = std::make_unique<Session>(model, sequences, api::session_options(options, sequences));
    b.source = std::make_unique<SessionSource>(*b.session);
  }
}

Batch::~Batch() = default;

std::vector<std::string> Batch::run_turn(const TokenInputs& turn, const GenerateOptions& o,
                                         const std::function<void(int, const std::string&)>& on_text) {
  Impl& b = *impl_;
  const ModelConfig& c = b.engine->impl().model.config();
  if (turn.batch != b.sequences)
    throw InputError("the turn has " + std::to_string(turn.batch) + " sequences, the batch " + std::to_string(b.sequences));
  if (!b.generator) {
    GenerationOptions go;
    go.sampling = api::sampling_options(o);
    go.stop_strings = o.stop;
    go.tokenizer = b.engine->impl().tokenizer.get();
    go.stop_tokens = c.eos_token_ids;
    if (o.end_of_turn_stops) {
      const SpecialTokens sp = SpecialTokens::resolve(c, api::require_tokenizer(*b.engine, "the chat template"));
      go.stop_tokens.push_back(SpecialTokens::require(sp.end_of_turn, "<end_of_turn>"));
    }
    go.keep_prompt_logits = o.keep_prompt_logits;
    go.keep_step_logits = o.keep_step_logits;
    if ((go.json_grammar = api::json_grammar(o))) go.vocabulary = api::vocabulary(*b.engine);
    b.generator = std::make_unique<Generator>(*b.source, c, go);
  }
  b.generator->set_on_text(on_text);
  const int max_new = turn.max_new_tokens >= 0 ? turn.max_new_tokens : o.max_new_tokens;
  const std::vector<std::string> texts = b.generator->run_turn({api::to_prompt_batch(turn, c), max_new});
  const GenerationResult& g = b.generator->result();
  BatchResult& r = b.result;
  r.tokens = g.tokens;
  r.texts = g.texts;
  r.stop_reasons.clear();
  for (StopReason s : g.stop_reasons) r.stop_reasons.push_back(stop_reason_name(s));
  r.prompt_tokens = g.prompt_tokens;
  r.prompt_logits = g.prompt_logits;
  r.step_logits = g.step_logits;
  r.steps = g.steps;
  r.prefill_ms = g.prefill_ms;
  r.decode_ms = g.decode_ms;
  r.decode_steps = g.decode_steps;
  return texts;
}

const BatchResult& Batch::result() const { return impl_->result; }

std::vector<TraceStep> Batch::trace() const { return impl_->session ? api::to_trace(impl_->session->trace()) : std::vector<TraceStep>{}; }

std::string Batch::describe_memory() const { return impl_->session ? api::describe_memory(*impl_->session) : std::string(); }

}  // namespace splitdec
