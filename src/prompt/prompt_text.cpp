#include "prompt/prompt_text.h"

#include <filesystem>

#include "core/error.h"
#include "io/media_embeddings.h"
#include "io/model_config.h"
#include "mask/mask_contract.h"
#include "tokenizer/tokenizer.h"
#include "media/media_loader.h"

namespace splitdec {

std::vector<int> reply_stop_tokens(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int> stops = config.eos_token_ids;
  const int end_of_turn = tokenizer ? SpecialTokens::resolve(config, *tokenizer).end_of_turn : -1;
  if (end_of_turn >= 0) stops.push_back(end_of_turn);
  return stops;
}

SpecialTokens SpecialTokens::resolve(const ModelConfig& c, const Tokenizer& tok) {
  SpecialTokens s;
  auto from_tok = [&](int config_id, const char* piece) { return config_id >= 0 ? config_id : tok.piece_id(piece); };
  s.bos = c.bos_token_id;
  s.eos = c.eos_token_ids.empty() ? -1 : c.eos_token_ids[0];
  // Gemma-3 names its turn markers <start_of_turn>/<end_of_turn>, Gemma-4 <|turn>/<turn|>.
  auto either = [&](const char* a, const char* b) { return tok.piece_id(a) >= 0 ? tok.piece_id(a) : tok.piece_id(b); };
  s.start_of_turn = either("<start_of_turn>", "<|turn>");
  s.end_of_turn = either("<end_of_turn>", "<turn|>");
  s.boi = from_tok(c.boi_token_id, "<start_of_image>");
  s.eoi = from_tok(c.eoi_token_id, "<end_of_image>");
  s.image_soft = from_tok(c.image_token_id, "<image_soft_token>");
  s.boa = from_tok(c.boa_token_id, "<start_of_audio>");
  s.eoa = from_tok(c.eoa_token_id, "<end_of_audio>");
  s.audio_soft = from_tok(c.audio_token_id, "<audio_soft_token>");
  return s;
}

int SpecialTokens::require(int id, const char* name) {
  if (id < 0) throw InputError(std::string("the model has no ") + name + " token (neither config.json nor the tokenizer defines it)");
  return id;
}

PromptBatch media_prompt(const SpecialTokens& sp, std::vector<float> rows_data, int64_t rows, Modality kind) {
  const bool image = kind == Modality::Image;
  PromptBatch p;
  p.batch = 1;
  auto push = [&](int id, Modality m) {
    p.tokens.push_back(id);
    p.modality.push_back(m);
  };
  push(SpecialTokens::require(image ? sp.boi : sp.boa, image ? "<start_of_image>" : "<start_of_audio>"), Modality::Text);
  const int soft = SpecialTokens::require(image ? sp.image_soft : sp.audio_soft, image ? "image soft" : "audio soft");
  for (int64_t k = 0; k < rows; ++k) push(soft, kind);
  push(SpecialTokens::require(image ? sp.eoi : sp.eoa, image ? "<end_of_image>" : "<end_of_audio>"), Modality::Text);
  p.seq = int(p.tokens.size());
  p.attention_mask.assign(p.tokens.size(), 1);
  p.media = std::move(rows_data);
  return p;
}

std::optional<MediaPlaceholder> next_media_placeholder(const std::string& text, size_t from) {
  for (size_t at = text.find('<', from); at != std::string::npos; at = text.find('<', at + 1)) {
    MediaPlaceholder ph;
    size_t start;
    if (text.compare(at, 7, "<image:") == 0) start = at + 7, ph.image = true;
    else if (text.compare(at, 7, "<audio:") == 0) start = at + 7, ph.image = false;
    else continue;
    const size_t close = text.find('>', start);
    if (close == std::string::npos) return std::nullopt;  // no '>' anywhere after: nothing further can match
    if (close == start) continue;
    ph.path = text.substr(start, close - start);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ph.path, ec)) continue;  // not a file: stays text
    ph.begin = at;
    ph.end = close + 1;
    return ph;
  }
  return std::nullopt;
}

std::vector<PromptPart> parts_of_text(const std::string& text) {
  std::vector<PromptPart> parts;
  size_t last = 0;
  for (auto ph = next_media_placeholder(text, 0); ph; ph = next_media_placeholder(text, ph->end)) {
    if (ph->begin > last) parts.push_back({Modality::Text, text.substr(last, ph->begin - last)});
    parts.push_back({ph->image ? Modality::Image : Modality::Audio, ph->path});
    last = ph->end;
  }
  if (last < text.size() || parts.empty()) parts.push_back({Modality::Text, text.substr(last)});
  return parts;
}

PromptBatch prompt_from_text(const std::string& text, const Tokenizer& tok, const ModelConfig& c, bool add_bos,
                             const MediaLoader* media_loader) {
  return prompt_from_parts(parts_of_text(text), tok, c, add_bos, media_loader);
}

PromptBatch prompt_from_parts(const std::vector<PromptPart>& parts, const Tokenizer& tok, const ModelConfig& c, bool add_bos,
                              const MediaLoader* media_loader) {
  const SpecialTokens sp = SpecialTokens::resolve(c, tok);
  PromptBatch p;
  p.batch = 1;
  auto push = [&](int id, Modality m) {
    p.tokens.push_back(id);
    p.modality.push_back(m);
  };
  auto push_text = [&](const std::string& s) {
    for (int id : tok.encode(s)) {
      Modality m = Modality::Text;
      if (id == c.image_token_id) m = Modality::Image;
      else if (id == c.video_token_id) m = Modality::Video;
      else if (id == c.audio_token_id) m = Modality::Audio;
      if (m != Modality::Text)
        throw InputError("prompt text contains a media soft token; use <image:FILE> or <audio:FILE> to insert media");
      push(id, m);
    }
  };
  auto push_block = [&](PromptBatch&& block) {
    p.tokens.insert(p.tokens.end(), block.tokens.begin(), block.tokens.end());
    p.modality.insert(p.modality.end(), block.modality.begin(), block.modality.end());
    if (p.media.empty()) p.media = std::move(block.media);  // the first block's rows move, not copy
    else p.media.insert(p.media.end(), block.media.begin(), block.media.end());
  };
  if (add_bos) push(SpecialTokens::require(sp.bos, "BOS"), Modality::Text);
  for (const PromptPart& part : parts) {
    if (part.kind == Modality::Text) {
      push_text(part.text);
      continue;
    }
    if (part.kind != Modality::Image && part.kind != Modality::Audio)
      throw InputError(part.text + ": a prompt part is text, an image or audio, not " + modality_name(part.kind));
    const Modality kind = part.kind;
    MediaEmbeddings media = media_loader ? media_loader->load_file(part.text, kind) : load_media_embeddings(part.text, c);
    if (media.crops == 0) {
      push_block(media_prompt(sp, std::move(media.data), media.rows, kind));
    } else {
      // Gemma-3 pan-and-scan: HF's text around the original's block and each crop's.
      const int64_t blocks = 1 + media.crops;
      if (media.crops < 0 || kind != Modality::Image || media.rows % blocks != 0 ||
          media.data.size() != size_t(media.rows) * size_t(c.hidden_size))
        throw InputError(part.text + ": " + std::to_string(media.rows) + " rows do not split into 1 + " +
                         std::to_string(media.crops) + " pan-and-scan image blocks");
      const int64_t per = media.rows / blocks;
      const size_t stride = size_t(per) * size_t(c.hidden_size);
      auto block = [&](int64_t k) {
        const auto from = media.data.begin() + std::ptrdiff_t(size_t(k) * stride);
        return media_prompt(sp, std::vector<float>(from, from + std::ptrdiff_t(stride)), per, kind);
      };
      push_text("Here is the original image ");
      push_block(block(0));
      push_text(" and here are some crops to help you see better ");
      for (int64_t k = 1; k < blocks; ++k) {
        if (k > 1) push_text(" ");
        push_block(block(k));
      }
    }
  }
  if (p.tokens.empty()) throw InputError("the prompt is empty");
  p.seq = int(p.tokens.size());
  p.attention_mask.assign(p.tokens.size(), 1);
  validate_prompt_batch(p, c);
  return p;
}

}  // namespace splitdec
