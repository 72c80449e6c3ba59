// Flags shared by the splitdec subcommands, and helpers to turn them into
// the public API's options (generate and chat are clients of that API).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "splitdec/splitdec.h"

namespace splitdec::cli {

// Integer flags are checked as text, before CLI11 converts them: CLI11 reads
// "-1" into an unsigned flag as 2^64-1, saturates an int64 flag past its
// range, and takes "010" as octal. Decimal only, within [lo, hi]; the error
// names the flag and the range. Attach with ->transform(): the text is passed
// on rewritten without leading zeros (->check() would hand CLI11 the original).
CLI::Validator integer_in(int64_t lo, int64_t hi);
// Seeds are 0..2^64-1; -1 is refused (there is no "random seed" value).
CLI::Validator seed_value();
// --threads: 0 is all cores; more than this is a typo, not a machine.
inline constexpr int kMaxThreadsFlag = 4096;

struct SessionFlags {
  std::string plan = "split";
  std::string policy;
  int chunk = 256;
  int64_t max_length = 0;
  bool trace = false, verbose = false;
  int threads = 0;
  std::string kv_dtype = "f32";
  std::string weights;  // LoadOptions::weights
  void add_to(CLI::App& app);
  ConversationOptions options(int64_t default_capacity) const;
  // --threads, for every engine of the process.
  void apply_threads() const {
    if (threads < 0) throw InputError("--threads must be >= 0");
    set_threads(threads);
  }
};

struct SamplingFlags {
  float temperature = 0.f, top_p = 1.f, min_p = 0.f, repetition_penalty = 1.f;
  int top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::string generation_config = "auto";  // auto: the model folder's generation_config.json; none: ignore it
  std::string json_schema;  // --json-schema: a schema file, or "object"
  void add_to(CLI::App& app);
  // The flags given, and for the sampling fields they leave unset the model
  // folder's generation_config.json as transformers reads it (do_sample:
  // temperature 1 and top_k 50 unless the file says otherwise). `applied`
  // (for --verbose): what was chosen and where each value came from.
  GenerateOptions options(int max_new_tokens, const std::string& model, std::string* applied = nullptr) const;

 private:
  CLI::Option *temperature_flag_ = nullptr, *top_k_flag_ = nullptr, *top_p_flag_ = nullptr, *min_p_flag_ = nullptr,
              *repetition_flag_ = nullptr;
};

// The progress line on stderr: `text` over the previous one, or the line
// cleared when `text` is empty.
void progress_line(const std::string& text);

// Media options with a progress line per image / audio file on stderr when
// it is a terminal.
MediaOptions media_options(int image_tokens, bool pan_and_scan);

// What the model is fed, as generate and tokenize take it: --prompt TEXT
// (with --chat: one user turn of the chat template, with --system, --image,
// --audio), or --messages FILE.json (a whole chat in the HF/OpenAI form).
struct PromptFlags {
  std::string prompt, messages, system;
  std::vector<std::string> images, audio;
  bool chat = false;
  int image_tokens = 0;  // Gemma-4 soft tokens per image (0: the model's default)
  bool pan_and_scan = false;  // Gemma-3: HF's do_pan_and_scan
  void add_to(CLI::App& app);
  // With a progress line per image / audio file when stderr is a terminal.
  MediaOptions media() const;
  bool given() const { return !prompt.empty() || !messages.empty(); }
  bool is_chat() const { return chat || !messages.empty(); }
  // Throws an InputError naming the flags that do not go together.
  void check() const;
  // The chat turn of --prompt --chat.
  ChatTurn chat_turn() const;
  // A plain --prompt as parts: the --image / --audio files in front, then
  // the text's own <image:FILE> / <audio:FILE> placeholders in place.
  std::vector<PromptPart> plain_parts() const;
  std::string messages_text() const;  // the --messages file
};

// A flag's value through its enum's parser (parse_execution_plan, ...);
// the error names the flag.
template <class Parse>
auto flag_value(const char* flag, const std::string& value, Parse parse) {
  try {
    return parse(value);
  } catch (const InputError& e) {
    throw InputError(std::string(flag) + " " + value + ": " + e.what());
  }
}

// --plan, --policy (empty: the family's) and --kv-dtype into `o`.
void apply_session_flags(ConversationOptions& o, const std::string& plan, const std::string& policy,
                         const std::string& kv_dtype);

// Loads a model, with a progress line on stderr when it is a terminal.
// weights: LoadOptions::weights ("" keeps the checkpoint's formats);
// mmproj: LoadOptions::mmproj.
std::shared_ptr<const Engine> load_engine(const std::string& dir, const std::string& weights = "",
                                          const std::string& mmproj = "");
// --mmproj FILE.gguf, as llama.cpp's multimodal tools take it.
void add_mmproj_option(CLI::App& cmd, std::string& mmproj);

void print_trace(const std::vector<TraceStep>& trace, size_t from);

}  // namespace splitdec::cli
