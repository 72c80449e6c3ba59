// splitdec generate: one prompt (or exact inputs, possibly several turns
// and sequences) through a Batch under one plan, or through the reference.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/npy.h"
#include "splitdec/batch.h"

namespace splitdec::cli {

namespace {

struct GenerateFlags {
  std::string model, mmproj, input, logits_path, step_logits_path;
  PromptFlags prompt;
  int max_new_tokens = 16;
  bool json = false;
  SessionFlags session;
  SamplingFlags sampling;
};

nlohmann::json trace_json(const std::vector<TraceStep>& trace) {
  nlohmann::json out = nlohmann::json::array();
  for (const TraceStep& e : trace)
    out.push_back({{"kind", e.decode ? "decode" : "prefill"},
                   {"begin", e.begin},
                   {"end", e.end},
                   {"path", e.path},
                   {"kv_bytes_allocated", e.kv_bytes_allocated},
                   {"kv_bytes_copied", e.kv_bytes_copied}});
  return out;
}

int run(const GenerateFlags& f) {
  if (f.prompt.given() == !f.input.empty() || (!f.prompt.prompt.empty() && !f.prompt.messages.empty()))
    throw InputError("generate: give exactly one of --prompt, --messages or --input");
  f.prompt.check();
  if (f.max_new_tokens < 0) throw InputError("--max-new-tokens must be >= 0");
  std::string sampling_note;
  GenerateOptions go = f.sampling.options(f.max_new_tokens, f.model, &sampling_note);
  if (f.session.verbose) std::fputs(sampling_note.c_str(), stderr);
  go.keep_prompt_logits = !f.logits_path.empty();
  go.keep_step_logits = !f.step_logits_path.empty();
  go.validate();  // before a model that may be large is loaded
  f.session.apply_threads();
  const auto engine = load_engine(f.model, f.session.weights, f.mmproj);
  std::vector<TokenInputs> turns;
  const auto encode_start = std::chrono::steady_clock::now();  // the prompt's text and media to inputs
  if (!f.input.empty()) {
    if (f.prompt.chat || !f.prompt.images.empty() || !f.prompt.audio.empty())
      throw InputError("--chat, --image and --audio apply to --prompt, not to exact --input tokens");
    turns = read_inputs_json(f.input, *engine);
  } else {
    if (!engine->has_tokenizer())
      throw InputError(f.model + ": a text prompt needs a tokenizer.json or tokenizer.model in the model directory");
    if (!f.prompt.messages.empty())
      turns.push_back(engine->encode_messages(f.prompt.messages_text(),
                                              std::filesystem::path(f.prompt.messages).parent_path().string(), true,
                                              f.prompt.media()));
    else if (f.prompt.chat)
      turns.push_back(engine->encode_chat(f.prompt.chat_turn()));
    else
      turns.push_back(engine->encode_parts(f.prompt.plain_parts(), f.prompt.media()));
  }
  const double encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - encode_start).count();
  if (f.session.verbose) std::fprintf(stderr, "prompt encoded (text and media) in %.1f ms\n", encode_ms);
  const int batch = turns[0].batch;
  int64_t needed = 0;
  for (const TokenInputs& t : turns) needed += t.seq + (t.max_new_tokens >= 0 ? t.max_new_tokens : f.max_new_tokens);
  Batch runner(engine, batch, f.session.options(needed));
  if (f.session.verbose) std::fputs(runner.describe_memory().c_str(), stderr);

  // Stream text as it is produced for a single sequence on the plain output.
  const bool stream = batch == 1 && engine->has_tokenizer() && !f.json;
  // The header goes out with the first text, so an error prints nothing before it.
  bool header = false;
  auto print_header = [&header] {
    if (!header) std::printf("[0] text: "), header = true;
  };
  std::function<void(int, const std::string&)> on_text;
  if (stream)
    on_text = [&print_header](int, const std::string& t) {
      print_header();
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
    };
  go.end_of_turn_stops = f.prompt.is_chat();  // the reply also ends where the model closes its turn
  std::string error;  // a turn that fails after others ran: what they made is still printed
  try {
    for (const TokenInputs& t : turns) runner.run_turn(t, go, on_text);
  } catch (const Error& e) {
    if (!f.json || runner.result().tokens.empty()) throw;  // nothing was made
    error = e.what();
  }
  if (f.session.verbose) std::fprintf(stderr, "after the run: %s", runner.describe_memory().c_str());
  const BatchResult& r = runner.result();
  if (stream) print_header(), std::printf("\n");
  std::fflush(stdout);  // keep stdout and the stderr summary below in order

  const int vocab = engine->vocab_size();
  if (!f.logits_path.empty()) write_npy(f.logits_path, {batch, turns[0].seq, vocab}, r.prompt_logits.data());
  if (!f.step_logits_path.empty()) write_npy(f.step_logits_path, {batch, r.steps, vocab}, r.step_logits.data());
  if (f.session.trace && !f.json) print_trace(runner.trace(), 0);
  if (f.json) {
    for (int b = 0; b < batch; ++b) {
      nlohmann::json j = {{"sequence", b},
                          {"tokens", r.tokens[size_t(b)]},
                          {"text", r.texts[size_t(b)]},
                          {"stop_reason", r.stop_reasons[size_t(b)]},
                          {"prompt_tokens", r.prompt_tokens[size_t(b)]},
                          {"encode_ms", encode_ms},
                          {"prefill_ms", r.prefill_ms},
                          {"decode_ms", r.decode_ms},
                          {"decode_tokens", r.decode_steps},
                          {"plan", f.session.plan},
                          {"trace", trace_json(runner.trace())}};
      if (!error.empty()) j["error"] = error;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
    if (!error.empty()) throw InputError(error);  // one error line, exit 1, after what was made
    return 0;
  }
  std::fprintf(stderr, "plan %s: prefill %.1f ms; decode %d steps in %.1f ms (%.1f tokens/s per sequence)\n",
               f.session.plan.c_str(), r.prefill_ms, r.decode_steps, r.decode_ms,
               r.decode_ms > 0 ? 1000.0 * r.decode_steps / r.decode_ms : 0.0);
  for (int b = 0; b < batch; ++b) {
    std::printf("[%d] tokens:", b);
    for (int t : r.tokens[size_t(b)]) std::printf(" %d", t);
    std::printf("\n");
    if (engine->has_tokenizer() && !stream) std::printf("[%d] text: %s\n", b, r.texts[size_t(b)].c_str());
  }
  return 0;
}

}  // namespace

void add_generate(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("generate", "generate from a prompt or exact inputs");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("-m,--model", f->model, "model directory")->required();
  add_mmproj_option(*cmd, f->mmproj);
  f->prompt.add_to(*cmd);
  cmd->add_option("--input", f->input, "exact inputs as JSON (tokens, modality, attention_mask, media_embeddings; or turns)");
  cmd->add_option("-n,--max-new-tokens", f->max_new_tokens, "tokens to generate per sequence, 0 for none (default 16)")
      ->transform(integer_in(0, INT32_MAX));
  cmd->add_option("--logits", f->logits_path, "write prompt logits [batch, seq, vocab] as .npy");
  cmd->add_option("--step-logits", f->step_logits_path, "write logits of every generated step [batch, steps, vocab]");
  cmd->add_flag("--json", f->json, "print one JSON object per sequence");
  f->session.add_to(*cmd);
  f->sampling.add_to(*cmd);
  cmd->callback([f, &run_fn] { run_fn = [f] { return run(*f); }; });
}

}  // namespace splitdec::cli
