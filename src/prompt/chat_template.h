// The checkpoint's own chat template: conversation (HF messages) -> prompt
// text, rendered by the built-in Jinja interpreter (prompt/jinja/).
//
// Loading (ChatTemplate::from_model_dir), as transformers does:
//   1. <dir>/chat_template.jinja, when present, wins;
//   2. else tokenizer_config.json's "chat_template": a string, or a list of
//      {"name", "template"} of which the one named "default" is taken;
//   3. else <dir>/chat_template.json's "chat_template" (the processor's copy);
//   4. else splitdec's built-in template for the family ("gemma3", "gemma4").
// A GGUF file (FILE.gguf) gives its tokenizer.chat_template, else the built-in.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "prompt/jinja/template.h"

namespace splitdec {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Unset: the checkpoint's tokenizer_config.json tokens, else "<bos>" / "<eos>".
  std::optional<std::string> bos_token, eos_token;
  // More template variables, e.g. {"enable_thinking": true}. The four above
  // (and "messages") win over keys of the same name here.
  nlohmann::json extra_context = nlohmann::json::object();
};

class ChatTemplate {
 public:
  // Throws ConfigError for an unknown family, FormatError for an unreadable
  // or malformed template source, TemplateError for a template that does not parse.
  static ChatTemplate from_model_dir(const std::filesystem::path& dir, const std::string& family);
  static ChatTemplate from_source(std::string source);
  static ChatTemplate builtin(const std::string& family);

  // `messages`: a JSON array of {"role", "content"}; content a string or a
  // list of parts {"type": "text", "text"} / {"type": "image"} / {"type": "audio"}.
  // Throws TemplateError (jinja::TemplateError, an Error) when the template fails.
  std::string render(const nlohmann::json& messages, const ChatRenderOptions& options = {}) const;

  bool is_builtin() const { return builtin_; }
  const std::string& source() const { return source_; }
  // Where the source came from: a file path, "source" or "built-in gemma3".
  const std::string& origin() const { return origin_; }

  // The text of the built-in template of a family (for tests and docs).
  static const std::string& builtin_source(const std::string& family);

 private:
  ChatTemplate(std::string source, std::string origin, bool builtin);

  std::string source_, origin_;
  bool builtin_ = false;
  std::string default_bos_ = "<bos>", default_eos_ = "<eos>";
  jinja::Template template_;
};

}  // namespace splitdec
