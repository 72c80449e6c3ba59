// splitdec tokenize: what the model is fed, to check the tokenizer against
// other tools (llama.cpp's llama-tokenize plays the same part).
//   --prompt TEXT [--chat] [--system TEXT] [--image FILE]... | --messages FILE.json:
//     {"tokens": [...], "pieces": [...]}, exactly the ids `generate` feeds
//     (BOS, the chat template, media expanded as HF's processor does).
//   --strings FILE.json: a JSON array of strings -> a JSON array of id arrays,
//     each encoded with no special tokens added (HF's add_special_tokens=False).
// Only config.json and the tokenizer are read (and the media files, to count
// their soft tokens), never the weights.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "media/media_loader.h"
#include "prompt/chat_prompt.h"
#include "prompt/prompt_text.h"

namespace splitdec::cli {

namespace {

struct TokenizeFlags {
  std::string model, mmproj, strings;
  PromptFlags prompt;
};

// Image and audio files count their soft tokens from config.json alone (the
// block's rows are zeros here: tokenize shows ids, never embeddings).
MediaLoader media_counter(const std::string& dir, const std::string& mmproj, const ModelConfig& config,
                          const MediaOptions& media) {
  auto frontend = std::make_shared<const MediaFrontend>(load_frontend_config(dir, config, mmproj), FrontendWeights{}, false, 0);
  return MediaLoader::counting(config, std::move(frontend), ImageOptions{media.image_tokens, media.pan_and_scan});
}

int run(const TokenizeFlags& f) {
  if (f.prompt.given() == !f.strings.empty() || (!f.prompt.prompt.empty() && !f.prompt.messages.empty()))
    throw InputError("tokenize: give exactly one of --prompt, --messages or --strings");
  f.prompt.check();
  const ModelConfig config = load_model_config(f.model, f.mmproj);
  const auto tokenizer = Tokenizer::open_dir(f.model);
  if (!tokenizer) throw InputError(f.model + ": tokenize needs a tokenizer.json or tokenizer.model in the model directory");
  auto piece = [&](int id) { return id < tokenizer->piece_count() ? tokenizer->piece(id) : "<id:" + std::to_string(id) + ">"; };
  nlohmann::json out;
  if (f.prompt.given()) {
    PromptBatch p;
    if (f.prompt.is_chat()) {
      const ChatTemplate chat_template = ChatTemplate::from_model_dir(f.model, config.family == Family::Gemma4 ? "gemma4" : "gemma3");
      const ChatPrompter prompter(config, *tokenizer, chat_template, media_counter(f.model, f.mmproj, config, f.prompt.media()));
      p = f.prompt.messages.empty()
              ? prompter.encode(chat_turn_messages(f.prompt.system, f.prompt.images, f.prompt.audio, f.prompt.prompt), true)
              : prompter.encode(parse_chat_messages(f.prompt.messages_text(),
                                                    std::filesystem::path(f.prompt.messages).parent_path().string(),
                                                    f.prompt.messages),
                                true);
    } else {
      const MediaLoader media = media_counter(f.model, f.mmproj, config, f.prompt.media());
      p = prompt_from_parts(f.prompt.plain_parts(), *tokenizer, config, true, &media);
    }
    out = {{"tokens", p.tokens}, {"pieces", nlohmann::json::array()}};
    for (int id : p.tokens) out["pieces"].push_back(piece(id));
  } else {
    std::ifstream in(f.strings);
    if (!in) throw InputError(f.strings + ": cannot open");
    nlohmann::json strings;
    try {
      strings = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(f.strings + ": malformed JSON: " + e.what());
    }
    if (!strings.is_array()) throw InputError(f.strings + ": must be a JSON array of strings");
    out = nlohmann::json::array();
    for (const auto& s : strings) {
      if (!s.is_string()) throw InputError(f.strings + ": must be a JSON array of strings, found " + s.dump());
      out.push_back(tokenizer->encode(s.get<std::string>()));
    }
  }
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

void add_tokenize(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids a prompt (or each string of a JSON array) becomes");
  auto f = std::make_shared<TokenizeFlags>();
  cmd->add_option("-m,--model", f->model, "model directory (config.json and tokenizer)")->required();
  add_mmproj_option(*cmd, f->mmproj);
  f->prompt.add_to(*cmd);
  cmd->add_option("--strings", f->strings, "a JSON array of strings, each encoded without special tokens");
  cmd->callback([f, &run_fn] { run_fn = [f] { return run(*f); }; });
}

}  // namespace splitdec::cli
