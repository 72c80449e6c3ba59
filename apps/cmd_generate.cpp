// splitdec generate: one prompt (or exact inputs, possibly several turns)
// through a session under one plan, or through the reference.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/error.h"
#include "core/npy.h"
#include "generate/prompt_text.h"
#include "io/prompt_input.h"
#include "io/tokenizer.h"

namespace splitdec::cli {

namespace {

struct GenerateFlags {
  std::string model, prompt, input, logits_path, step_logits_path;
  int max_new_tokens = 16;
  bool chat = false, json = false;
  SessionFlags session;
  SamplingFlags sampling;
};

nlohmann::json trace_json(const std::vector<TraceEntry>& trace) {
  nlohmann::json out = nlohmann::json::array();
  for (const TraceEntry& e : trace)
    out.push_back({{"kind", e.kind == TraceEntry::Prefill ? "prefill" : "decode"},
                   {"begin", e.begin},
                   {"end", e.end},
                   {"path", path_name(e.path)},
                   {"kv_bytes_allocated", e.kv_bytes_allocated},
                   {"kv_bytes_copied", e.kv_bytes_copied}});
  return out;
}

int run(const GenerateFlags& f, const CLI::App& cmd) {
  if (f.prompt.empty() == f.input.empty()) throw InputError("generate: give exactly one of --prompt or --input");
  if (f.max_new_tokens < 0) throw InputError("--max-new-tokens must be >= 0");
  const Model model = load_model(f.model);
  const ModelConfig& c = model.config();
  const auto tokenizer = Tokenizer::open_dir(f.model);
  std::vector<Turn> turns;
  GenerationOptions go;
  go.sampling = f.sampling.options(cmd);
  go.stop_strings = f.sampling.stop;
  go.tokenizer = tokenizer.get();
  go.stop_tokens = c.eos_token_ids;
  if (!f.input.empty()) {
    if (f.chat) throw InputError("--chat applies to --prompt, not to exact --input tokens");
    turns = read_turns_json(f.input, c, f.max_new_tokens);
  } else {
    if (!tokenizer) throw InputError(f.model + ": --prompt needs a tokenizer.model in the model directory");
    std::string text = f.prompt;
    if (f.chat) {
      text = chat_user_turn(text, true, true);
      const SpecialTokens sp = SpecialTokens::resolve(c, *tokenizer);
      go.stop_tokens.push_back(SpecialTokens::require(sp.end_of_turn, "<end_of_turn>"));
    }
    turns.push_back({prompt_from_text(text, *tokenizer, c, true), f.max_new_tokens});
  }
  const int batch = turns[0].prompt.batch;
  // Stream text as it is produced for a single sequence on the plain output.
  const bool stream = batch == 1 && tokenizer && !f.json;
  if (stream) {
    std::printf("[0] text: ");
    go.on_text = [](int, const std::string& t) {
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
    };
  }

  int64_t needed = 0;
  for (const Turn& t : turns) needed += t.prompt.seq + t.max_new_tokens;
  std::unique_ptr<Session> session;
  std::unique_ptr<LogitsSource> source;
  if (f.session.plan == "reference") {
    source = std::make_unique<ReferenceSource>(model, f.session.policy.empty() ? c.default_policy : parse_mask_policy(f.session.policy));
  } else {
    session = std::make_unique<Session>(model, batch, f.session.options(c, needed));
    if (f.session.verbose) print_memory(*session);
    source = std::make_unique<SessionSource>(*session);
  }
  Generator gen(*source, c, go);
  for (const Turn& t : turns) gen.run_turn(t);
  const GenerationResult& r = gen.result();
  if (stream) std::printf("\n");
  std::fflush(stdout);  // keep stdout and the stderr summary below in order

  if (!f.logits_path.empty()) write_npy(f.logits_path, {batch, turns[0].prompt.seq, c.vocab_size}, r.prompt_logits.data());
  if (!f.step_logits_path.empty()) write_npy(f.step_logits_path, {batch, r.steps, c.vocab_size}, r.step_logits.data());
  if (session && f.session.trace && !f.json) print_trace(session->trace(), 0);
  if (f.json) {
    for (int b = 0; b < batch; ++b) {
      nlohmann::json j = {{"sequence", b},
                          {"tokens", r.tokens[size_t(b)]},
                          {"text", r.texts[size_t(b)]},
                          {"stop_reason", stop_reason_name(r.stop_reasons[size_t(b)])},
                          {"prompt_tokens", r.prompt_tokens[size_t(b)]},
                          {"prefill_ms", r.prefill_ms},
                          {"decode_ms", r.decode_ms},
                          {"decode_tokens", r.decode_steps},
                          {"plan", f.session.plan},
                          {"trace", session ? trace_json(session->trace()) : nlohmann::json::array()}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
    return 0;
  }
  std::fprintf(stderr, "plan %s: prefill %.1f ms; decode %d steps in %.1f ms (%.1f tokens/s per sequence)\n",
               f.session.plan.c_str(), r.prefill_ms, r.decode_steps, r.decode_ms,
               r.decode_ms > 0 ? 1000.0 * r.decode_steps / r.decode_ms : 0.0);
  for (int b = 0; b < batch; ++b) {
    std::printf("[%d] tokens:", b);
    for (int t : r.tokens[size_t(b)]) std::printf(" %d", t);
    std::printf("\n");
    if (tokenizer && !stream) std::printf("[%d] text: %s\n", b, r.texts[size_t(b)].c_str());
  }
  return 0;
}

}  // namespace

void add_generate(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("generate", "generate from a prompt or exact inputs");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("--model", f->model, "model directory")->required();
  cmd->add_option("--prompt", f->prompt, "text prompt; <image:FILE> / <audio:FILE> insert media embeddings (.npy, .safetensors)");
  cmd->add_option("--input", f->input, "exact inputs as JSON (tokens, modality, attention_mask, media_embeddings; or turns)");
  cmd->add_option("--max-new-tokens", f->max_new_tokens, "tokens to generate per sequence (default 16)");
  cmd->add_option("--logits", f->logits_path, "write prompt logits [batch, seq, vocab] as .npy");
  cmd->add_option("--step-logits", f->step_logits_path, "write logits of every generated step [batch, steps, vocab]");
  cmd->add_flag("--chat", f->chat, "wrap the prompt in the Gemma chat template");
  cmd->add_flag("--json", f->json, "print one JSON object per sequence");
  f->session.add_to(*cmd);
  f->sampling.add_to(*cmd);
  cmd->callback([cmd, f, &run_fn] { run_fn = [cmd, f] { return run(*f, *cmd); }; });
}

}  // namespace splitdec::cli
