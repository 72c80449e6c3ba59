// splitdec chat: one user turn per line of stdin, until EOF, through a
// Conversation in the model's chat template. Its KV cache is kept between
// turns, so a turn costs only its new tokens. A line "/image FILE" or
// "/audio FILE" stages media for the next turn. It behaves the same on a
// terminal and on a pipe (the prompt marker goes to stderr, and only on a
// terminal).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli_common.h"

namespace splitdec::cli {

namespace {

struct ChatFlags {
  std::string model, system;
  int max_new_tokens = 128;
  int image_tokens = 0;
  bool pan_and_scan = false;
  SessionFlags session;
  SamplingFlags sampling;
};

int run(const ChatFlags& f) {
  if (f.session.plan == "reference") throw InputError("chat runs a session: choose single, split, split-copy or unified");
  std::string sampling_note;
  const GenerateOptions go = f.sampling.options(f.max_new_tokens, f.model, &sampling_note);
  if (f.session.verbose) std::fputs(sampling_note.c_str(), stderr);
  ConversationOptions co = f.session.options(4096);
  co.media.image_tokens = f.image_tokens;
  co.media.pan_and_scan = f.pan_and_scan;
  co.keep_trace = f.session.trace;  // a long chat keeps no entry per token unless asked
  go.validate();  // before a model that may be large is loaded
  f.session.apply_threads();
  const auto engine = load_engine(f.model, f.session.weights);
  if (!engine->has_tokenizer()) throw InputError(f.model + ": chat needs a tokenizer.json or tokenizer.model in the model directory");
  Conversation chat(engine, co);
  if (!f.system.empty()) chat.set_system(f.system);
  if (f.session.verbose) std::fputs(chat.describe_memory().c_str(), stderr);
  const bool interactive = ::isatty(0);
  std::string line;
  for (;;) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const size_t trace_from = chat.trace().size();
    for (const char* command : {"/image ", "/audio "})
      if (line.rfind(command, 0) == 0) {
        const std::string path = line.substr(std::strlen(command));
        if (!std::filesystem::is_regular_file(path)) {
          std::fprintf(stderr, "splitdec: error: %s: no such file\n", path.c_str());
        } else {
          command[1] == 'i' ? chat.append_image(path) : chat.append_audio(path);
          if (interactive) std::fprintf(stderr, "(%s staged for the next turn)\n", path.c_str());
        }
        line.clear();
      }
    if (line.empty()) continue;
    try {
      chat.append_user_turn(line);
      chat.generate(go, [](const std::string& t) {
        std::fwrite(t.data(), 1, t.size(), stdout);
        std::fflush(stdout);
      });
    } catch (const Error& e) {
      // The conversation is left as it was before the turn: report and read the next one.
      std::fflush(stdout);
      std::fprintf(stderr, "splitdec: error: %s\n", e.what());
      continue;
    }
    std::printf("\n");
    if (f.session.trace) print_trace(chat.trace(), trace_from);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void add_chat(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("chat", "multi-turn chat: one user turn per line of stdin until EOF");
  auto f = std::make_shared<ChatFlags>();
  cmd->add_option("-m,--model", f->model, "model directory")->required();
  cmd->add_option("-n,--max-new-tokens", f->max_new_tokens, "tokens per reply (default 128)")
      ->transform(integer_in(1, INT32_MAX));
  cmd->add_option("--system", f->system, "the system turn");
  cmd->add_option("--image-tokens", f->image_tokens,
                  "Gemma-4 soft tokens per /image file: 70, 140, 280, 560, 1120 (default: the model's)")
      ->transform(integer_in(0, INT32_MAX));
  cmd->add_flag("--pan-and-scan", f->pan_and_scan,
                "Gemma-3: also encode 2-4 crops of a wide or tall /image file (HF's do_pan_and_scan)");
  f->session.add_to(*cmd);
  f->sampling.add_to(*cmd);
  cmd->callback([f, &run_fn] { run_fn = [f] { return run(*f); }; });
}

}  // namespace splitdec::cli
