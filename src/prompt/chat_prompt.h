// Chat messages to the ids and media rows a model is fed, as Hugging Face's
// apply_chat_template + processor do it: render the checkpoint's template,
// expand each media placeholder the template wrote into the family's block
// (Gemma-3: "\n\n<boi>" + N soft tokens + "<eoi>\n\n" with N =
// mm_tokens_per_image; Gemma-4: <|image> + N x <|image|> + <image|> with N
// from the media, audio likewise), then tokenize the whole text. Gemma-3
// pan-and-scan rows (MediaEmbeddings::crops) become HF's "Here is the
// original image <block> and here are some crops to help you see better
// <block> <block>...". Special ids
// and marker strings come from config.json and the tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/media_embeddings.h"
#include "media/media_loader.h"
#include "model/prompt_batch.h"
#include "prompt/chat_template.h"

namespace splitdec {

struct ModelConfig;
class Tokenizer;

struct ChatPart {
  enum class Kind { Text, Image, Audio };
  Kind kind = Kind::Text;
  std::string text;  // Text
  std::string path;  // Image / Audio: a media file (PNG / JPEG / WAV / FLAC) or embeddings (.npy / .safetensors)
  // Image / Audio rows already in memory (a server's data: URL); used instead of `path`.
  std::shared_ptr<const MediaEmbeddings> rows{};
  // Image / Audio: the media file's bytes (a --messages data: URL or
  // input_audio), used instead of reading `path`, which then names it in messages.
  std::string bytes{};
};

struct ChatMessage {
  std::string role;  // system | user | assistant (and whatever the template accepts)
  std::vector<ChatPart> parts;
  // More keys of the message as the template reads it (a server's
  // tool_calls and tool_responses).
  nlohmann::json fields = nlohmann::json::object();
};

// The HF/OpenAI chat form: [{"role": ..., "content": "text" | [{"type": "text",
// "text": ...}, {"type": "image", "path": ...}, {"type": "audio", "path": ...}]}].
// Relative paths are taken from `base_dir`. Errors name the message and key.
std::vector<ChatMessage> parse_chat_messages(const std::string& json_text, const std::string& base_dir,
                                             const std::string& source);

// "Describe <image:cat.npy> please" -> text, image, text parts. A placeholder
// whose file does not exist stays text.
std::vector<ChatPart> parts_from_shorthand(const std::string& text);

// One user turn: the system turn (when `system` is not empty), then a user
// message with the images, the audio (before the text, as HF's examples put
// them) and the text with its shorthands.
std::vector<ChatMessage> chat_turn_messages(const std::string& system, const std::vector<std::string>& images,
                                            const std::vector<std::string>& audio, const std::string& text);

class ChatPrompter {
 public:
  // `media` reads the media parts' files (images and audio through the
  // model's frontends); without it only embeddings files load.
  ChatPrompter(const ModelConfig& config, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
               std::optional<MediaLoader> media = std::nullopt);

  // The rendered text before media expansion (what `tokenize` shows and
  // tests compare). `tools`: the template's "tools" variable (OpenAI's list
  // of {"type": "function", "function": {...}}); null: none.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const nlohmann::json& tools = nullptr) const;
  // Ids, modality and media rows of the whole conversation; `reply_prefix`:
  // text the reply is made to start with (written after the generation prompt).
  PromptBatch encode(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const nlohmann::json& tools = nullptr, const std::string& reply_prefix = {}) const;
  // Expands the placeholders of rendered `text` with `media` (the media parts
  // in order; text parts are ignored) and tokenizes it; `add_bos`: a BOS
  // first unless the text starts with one (HF's rule).
  PromptBatch expand(const std::string& text, const std::vector<ChatPart>& media, bool add_bos) const;

 private:
  const ModelConfig& config_;
  const Tokenizer& tokenizer_;
  const ChatTemplate& template_;
  MediaLoader media_;
};

}  // namespace splitdec
