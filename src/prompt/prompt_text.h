// Plain text prompts: media placeholders, media blocks (markers + soft
// tokens) and the special tokens they need. Chat prompts go through the
// model's template (chat_prompt.h). With prompt_json.h this room is the one
// place where inputs become token ids and media rows; the CLI and the API
// both come here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/prompt_batch.h"
#include "splitdec/prompt_part.h"

namespace splitdec {

struct ModelConfig;
class Tokenizer;
class MediaLoader;

// Special tokens, from the config (BOS, EOS, media ids) and the tokenizer
// (turn markers). -1 where neither has one.
struct SpecialTokens {
  int bos = -1, eos = -1, start_of_turn = -1, end_of_turn = -1;
  int boi = -1, eoi = -1, image_soft = -1, boa = -1, eoa = -1, audio_soft = -1;

  static SpecialTokens resolve(const ModelConfig& config, const Tokenizer& tokenizer);
  // Throws InputError naming the token when it is missing (-1).
  static int require(int id, const char* name);
};

// Where a chat reply ends: the model's EOS ids, then its end-of-turn token
// when `tokenizer` (may be null) has one.
std::vector<int> reply_stop_tokens(const ModelConfig& config, const Tokenizer* tokenizer);

// One media block as the model sees it: the begin marker, one soft token
// per row of `rows_data` ([rows, hidden]), the end marker; the rows ride
// along as the prompt's media. `kind` is Image or Audio.
PromptBatch media_prompt(const SpecialTokens& special, std::vector<float> rows_data, int64_t rows, Modality kind);

// The next "<image:PATH>" / "<audio:PATH>" at or after `from` whose PATH
// (no '>' in it) is an existing file; other text of that form stays text.
// A plain scan: std::regex recurses per character on long inputs.
struct MediaPlaceholder {
  size_t begin = 0, end = 0;  // [begin, end) in the text
  bool image = true;
  std::string path;
};
std::optional<MediaPlaceholder> next_media_placeholder(const std::string& text, size_t from);

// Tokenizes `text` (after a BOS when `add_bos`). Each <image:PATH> naming an
// existing file (other text in that form stays text) becomes
// <start_of_image>, one image soft token per row PATH gives, <end_of_image>;
// <audio:PATH> likewise with the audio tokens. PATH is read by `media`
// (images and audio through the model's frontends); without it, only
// embeddings files (.npy / .safetensors).
PromptBatch prompt_from_text(const std::string& text, const Tokenizer& tokenizer, const ModelConfig& config, bool add_bos = true,
                             const MediaLoader* media = nullptr);

// The placeholders of `text` as parts: media where next_media_placeholder
// finds one, text between.
std::vector<PromptPart> parts_of_text(const std::string& text);

// prompt_from_text's prompt from parts: each text part tokenized as it is
// (no placeholder read), each media part a block (pan-and-scan framing for
// a Gemma-3 image with crops).
PromptBatch prompt_from_parts(const std::vector<PromptPart>& parts, const Tokenizer& tokenizer, const ModelConfig& config,
                              bool add_bos = true, const MediaLoader* media = nullptr);

}  // namespace splitdec
