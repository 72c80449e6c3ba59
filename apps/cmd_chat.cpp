// splitdec chat: one user turn per line of stdin, until EOF. The session's
// KV cache is kept between turns, so a turn costs only its new tokens. It
// behaves the same on a terminal and on a pipe (the prompt marker goes to
// stderr, and only on a terminal).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "generate/prompt_text.h"
#include "io/tokenizer.h"

namespace splitdec::cli {

namespace {

struct ChatFlags {
  std::string model;
  int max_new_tokens = 128;
  SessionFlags session;
  SamplingFlags sampling;
};

int run(const ChatFlags& f, const CLI::App& cmd) {
  const Model model = load_model(f.model);
  const ModelConfig& c = model.config();
  const auto tokenizer = Tokenizer::open_dir(f.model);
  if (!tokenizer) throw InputError(f.model + ": chat needs a tokenizer.model in the model directory");
  const SpecialTokens sp = SpecialTokens::resolve(c, *tokenizer);
  const int end_of_turn = SpecialTokens::require(sp.end_of_turn, "<end_of_turn>");
  SpecialTokens::require(sp.start_of_turn, "<start_of_turn>");
  if (f.session.plan == "reference") throw InputError("chat runs a session: choose single, split, split-copy or unified");
  Session session(model, 1, f.session.options(c, 4096));
  if (f.session.verbose) print_memory(session);
  SessionSource source(session);
  GenerationOptions go;
  go.sampling = f.sampling.options(cmd);
  go.stop_strings = f.sampling.stop;
  go.tokenizer = tokenizer.get();
  go.stop_tokens = c.eos_token_ids;
  go.stop_tokens.push_back(end_of_turn);
  go.on_text = [](int, const std::string& t) {
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };
  Generator gen(source, c, go);
  const bool interactive = ::isatty(0);
  bool first = true;
  std::string line;
  for (;;) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const bool closed = first || (!gen.pending().empty() && gen.pending()[0] == end_of_turn);
    const size_t trace_from = session.trace().size();
    const int64_t length_before = session.length();
    const std::vector<int> pending_before = gen.pending();
    try {
      const PromptBatch p = prompt_from_text(chat_user_turn(line, first, closed), *tokenizer, c, first);
      gen.run_turn({p, f.max_new_tokens});
      first = false;
    } catch (const Error& e) {
      // The session is left as it was: report and read the next turn.
      std::fflush(stdout);
      std::fprintf(stderr, "splitdec: error: %s\n", e.what());
      if (session.length() != length_before) session.rewind(length_before);
      gen.set_pending(pending_before);
      continue;
    }
    std::printf("\n");
    if (f.session.trace) print_trace(session.trace(), trace_from);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void add_chat(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("chat", "multi-turn chat: one user turn per line of stdin until EOF");
  auto f = std::make_shared<ChatFlags>();
  cmd->add_option("--model", f->model, "model directory")->required();
  cmd->add_option("--max-new-tokens", f->max_new_tokens, "tokens per reply (default 128)");
  f->session.add_to(*cmd);
  f->sampling.add_to(*cmd);
  cmd->callback([cmd, f, &run_fn] { run_fn = [cmd, f] { return run(*f, *cmd); }; });
}

}  // namespace splitdec::cli
