// splitdec chat: one user turn per line of stdin, until EOF, through a
// Conversation in the model's chat template. Its KV cache is kept between
// turns, so a turn costs only its new tokens. A line "/image FILE" or
// "/audio FILE" stages media for the next turn; "/clear", "/save FILE" and
// "/help" do what /help says; Ctrl-C stops a reply (the turn is dropped)
// and the chat goes on. When the context (--max-length) is full, the oldest
// exchanges are dropped until half of it is free, and the chat says so. It
// behaves the same on a terminal and on a pipe (the prompt marker goes to
// stderr, and only on a terminal).
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace splitdec::cli {

namespace {

// Ctrl-C: stops the reply being written (the turn is dropped, the chat goes
// on); at the prompt it clears the line. Set by the handler, read by the loop.
volatile std::sig_atomic_t interrupted = 0;
void on_interrupt(int) { interrupted = 1; }
struct ReplyStopped {};

struct ChatFlags {
  std::string model, mmproj, system;
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
  const auto engine = load_engine(f.model, f.session.weights, f.mmproj);
  if (!engine->has_tokenizer()) throw InputError(f.model + ": chat needs a tokenizer.json or tokenizer.model in the model directory");
  Conversation chat(engine, co);
  if (!f.system.empty()) chat.set_system(f.system);
  if (f.session.verbose) std::fputs(chat.describe_memory().c_str(), stderr);
  const bool interactive = ::isatty(0);
  // The chat as --messages takes it, for /save (media parts by path).
  nlohmann::json transcript = nlohmann::json::array();
  if (!f.system.empty()) transcript.push_back({{"role", "system"}, {"content", f.system}});
  nlohmann::json staged = nlohmann::json::array();
  auto error = [](const std::string& what) { std::fprintf(stderr, "splitdec: error: %s\n", what.c_str()); };
  struct sigaction action {};
  action.sa_handler = on_interrupt;  // no SA_RESTART: a read waiting for a line returns
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  std::string line;
  for (;;) {
    if (interactive) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) {
      if (!interrupted) break;  // end of input
      interrupted = 0;  // Ctrl-C at the prompt: a fresh line
      std::cin.clear();
      std::fprintf(stderr, "\n");
      continue;
    }
    interrupted = 0;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const size_t trace_from = chat.trace().size();
    if (line == "/help") {
      std::fprintf(stderr,
                   "/image FILE   stage an image for the next turn\n"
                   "/audio FILE   stage an audio clip for the next turn\n"
                   "/clear        forget the conversation (the system prompt stays)\n"
                   "/save FILE    write the conversation as JSON messages (generate --messages FILE replays it)\n"
                   "/help         this list\n");
      continue;
    }
    if (line == "/clear") {
      chat.rewind(0);
      chat.set_system(f.system);
      transcript.erase(transcript.begin() + (f.system.empty() ? 0 : 1), transcript.end());
      staged = nlohmann::json::array();  // rewind dropped the staged media too
      if (interactive) std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line.rfind("/save ", 0) == 0) {
      const std::string path = line.substr(6);
      // Text that is not UTF-8 is written with U+FFFD, never refused.
      const std::string text = transcript.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      std::ofstream out(path);
      if (!(out << text)) error(path + ": cannot write");
      else if (interactive) std::fprintf(stderr, "(%zu messages saved to %s)\n", transcript.size(), path.c_str());
      continue;
    }
    for (const char* command : {"/image ", "/audio "})
      if (line.rfind(command, 0) == 0) {
        const std::string path = line.substr(std::strlen(command));
        if (!std::filesystem::is_regular_file(path)) {
          error(path + ": no such file");
        } else {
          // Staged here and handed to the chat with the turn (a turn that
          // must make room for itself hands them again).
          const std::string kind = command[1] == 'i' ? "image" : "audio";
          staged.push_back({{"type", kind}, {"path", std::filesystem::absolute(path).string()}});
          if (interactive) std::fprintf(stderr, "(%s staged for the next turn)\n", path.c_str());
        }
        line.clear();
      }
    if (line.empty()) continue;
    if (line[0] == '/' && line.find(' ') == std::string::npos && line.size() < 16) {
      error(line + ": not a command (/help lists them)");
      continue;
    }
    std::string reply;
    auto turn = [&] {
      for (const auto& part : staged)
        part["type"] == "image" ? chat.append_image(part["path"]) : chat.append_audio(part["path"]);
      chat.append_user_turn(line);
      return chat.generate(go, [](const std::string& t) {
        if (interrupted) throw ReplyStopped{};
        std::fwrite(t.data(), 1, t.size(), stdout);
        std::fflush(stdout);
      });
    };
    try {
      try {
        reply = turn();
      } catch (const CapacityError&) {
        // The context is full: the oldest exchanges go (whole, so never inside
        // a media block) until half of it is free, then the turn again; once
        // more with only the system turn kept.
        std::fflush(stdout);
        int dropped = chat.forget_oldest_turns(co.max_length / 2);
        if (dropped == 0) throw;
        auto forget = [&](int n) {
          const auto from = transcript.begin() + (f.system.empty() ? 0 : 1);
          transcript.erase(from, from + std::min<std::ptrdiff_t>(2 * n, transcript.end() - from));
          std::fprintf(stderr, "(the context is full: %d oldest exchange%s dropped, the rest prefilled again)\n", n,
                       n == 1 ? "" : "s");
        };
        forget(dropped);
        try {
          reply = turn();
        } catch (const CapacityError&) {
          if ((dropped = chat.forget_oldest_turns(0)) == 0) throw;
          forget(dropped);
          reply = turn();
        }
      }
    } catch (const ReplyStopped&) {
      // generate() rolled the turn back, as after any failed turn (its staged media too).
      interrupted = 0;
      staged = nlohmann::json::array();
      std::fflush(stdout);
      std::fprintf(stderr, "\n(stopped; this turn is dropped from the conversation)\n");
      continue;
    } catch (const Error& e) {
      // The conversation is left as it was before the turn: report and read the next one.
      std::fflush(stdout);
      error(e.what());
      staged = nlohmann::json::array();
      continue;
    }
    nlohmann::json content = staged;
    content.push_back({{"type", "text"}, {"text", line}});
    transcript.push_back({{"role", "user"}, {"content", content}});
    transcript.push_back({{"role", "assistant"}, {"content", reply}});
    staged = nlohmann::json::array();
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
  add_mmproj_option(*cmd, f->mmproj);
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
