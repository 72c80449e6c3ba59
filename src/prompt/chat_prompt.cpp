#include "prompt/chat_prompt.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"
#include "io/families/family.h"
#include "io/media_embeddings.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "prompt/prompt_text.h"

namespace splitdec {

namespace {

using nlohmann::json;

std::string kind_name(ChatPart::Kind k) { return k == ChatPart::Kind::Image ? "image" : k == ChatPart::Kind::Audio ? "audio" : "text"; }

// What the template sees: content as a plain string when the message is one
// text part (as most callers write it), else HF's list of typed parts.
json messages_json(const std::vector<ChatMessage>& messages) {
  json out = json::array();
  for (const ChatMessage& m : messages) {
    json content;
    if (m.parts.size() == 1 && m.parts[0].kind == ChatPart::Kind::Text) {
      content = m.parts[0].text;
    } else {
      content = json::array();
      for (const ChatPart& p : m.parts) {
        if (p.kind == ChatPart::Kind::Text) content.push_back({{"type", "text"}, {"text", p.text}});
        else content.push_back({{"type", kind_name(p.kind)}});
      }
    }
    json message = {{"role", m.role}, {"content", std::move(content)}};
    for (const auto& [key, value] : m.fields.items()) message[key] = value;
    out.push_back(std::move(message));
  }
  return out;
}

std::string piece_or_throw(const Tokenizer& tok, int id, const char* what) {
  if (id < 0 || id >= tok.piece_count()) throw InputError(std::string("the model has no ") + what + " token id in config.json");
  return tok.piece(id);
}

// OpenAI's media parts, as a server request carries them:
//   {"type": "image_url", "image_url": {"url": "data:image/png;base64,..." | "file:///x.png" | "x.png"}}
//   {"type": "input_audio", "input_audio": {"data": "<base64>", "format": "wav"}}
// A data: URL or input_audio's data is decoded here and read from memory;
// a file:// URL or a plain path is read as an "image" part's path.
ChatPart openai_media_part(const json& p, const std::string& type, const std::string& at, const std::string& base_dir) {
  const bool image = type == "image_url";
  ChatPart part{image ? ChatPart::Kind::Image : ChatPart::Kind::Audio, "", at + " (" + type + ")"};
  auto decode = [&](const std::string& data_url) {
    try {
      part.bytes = decode_data_url(data_url);
    } catch (const InputError& e) {
      throw InputError(at + ": " + e.what());
    }
    return part;
  };
  if (!image) {
    const json* a = p.contains("input_audio") && p["input_audio"].is_object() ? &p["input_audio"] : nullptr;
    if (!a || !a->contains("data") || !(*a)["data"].is_string())
      throw InputError(at + ": an input_audio part needs \"input_audio\": {\"data\": \"<base64>\", \"format\": \"wav\"}");
    return decode("data:;base64," + (*a)["data"].get<std::string>());
  }
  const json* iu = p.contains("image_url") ? &p["image_url"] : nullptr;
  const json* url = iu && iu->is_object() && iu->contains("url") ? &(*iu)["url"] : iu;
  if (!url || !url->is_string())
    throw InputError(at + ": an image_url part needs \"image_url\": {\"url\": \"data:...;base64,...\" or a file}");
  const std::string& u = url->get_ref<const std::string&>();
  if (u.rfind("data:", 0) == 0) return decode(u);
  if (u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0)
    throw InputError(at + ": remote URLs are not fetched; give a file path or a data: URL");
  std::string path = u.rfind("file://", 0) == 0 ? u.substr(7) : u;
  if (std::filesystem::path(path).is_relative()) path = (std::filesystem::path(base_dir) / path).string();
  part.path = path;
  return part;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace

std::vector<ChatMessage> parse_chat_messages(const std::string& json_text, const std::string& base_dir, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw InputError(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_array() || doc.empty()) throw InputError(source + ": expected a non-empty array of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& m = doc[i];
    const std::string where = source + ": message " + std::to_string(i);
    if (!m.is_object()) throw InputError(where + ": expected an object with \"role\" and \"content\"");
    if (!m.contains("role") || !m["role"].is_string()) throw InputError(where + ": \"role\" must be a string");
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    const json content = m.value("content", json());
    if (content.is_string()) {
      msg.parts.push_back({ChatPart::Kind::Text, content.get<std::string>(), ""});
    } else if (content.is_array()) {
      for (size_t k = 0; k < content.size(); ++k) {
        const json& p = content[k];
        const std::string at = where + " content " + std::to_string(k);
        if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
          throw InputError(at + ": expected an object with a \"type\"");
        const std::string type = p["type"].get<std::string>();
        if (type == "text") {
          if (!p.contains("text") || !p["text"].is_string()) throw InputError(at + ": a text part needs a string \"text\"");
          msg.parts.push_back({ChatPart::Kind::Text, p["text"].get<std::string>(), ""});
        } else if (type == "image_url" || type == "input_audio") {
          msg.parts.push_back(openai_media_part(p, type, at, base_dir));
        } else if (type == "image" || type == "audio") {
          std::string path;
          for (const char* key : {"path", "url", type == "image" ? "image" : "audio"})
            if (p.contains(key) && p[key].is_string()) path = p[key].get<std::string>();
          if (path.empty()) throw InputError(at + ": an " + type + " part needs a \"path\" to an embeddings file");
          if (std::filesystem::path(path).is_relative()) path = (std::filesystem::path(base_dir) / path).string();
          msg.parts.push_back({type == "image" ? ChatPart::Kind::Image : ChatPart::Kind::Audio, "", path});
        } else {
          throw InputError(at + ": unknown part type \"" + type + "\" (text, image, audio, image_url or input_audio)");
        }
      }
    } else {
      throw InputError(where + ": \"content\" must be a string or an array of parts");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::vector<ChatPart> parts_from_shorthand(const std::string& text) {
  std::vector<ChatPart> parts;
  size_t last = 0;
  for (auto ph = next_media_placeholder(text, 0); ph; ph = next_media_placeholder(text, ph->end)) {
    if (ph->begin > last) parts.push_back({ChatPart::Kind::Text, text.substr(last, ph->begin - last), ""});
    parts.push_back({ph->image ? ChatPart::Kind::Image : ChatPart::Kind::Audio, "", ph->path});
    last = ph->end;
  }
  if (last < text.size() || parts.empty()) parts.push_back({ChatPart::Kind::Text, text.substr(last), ""});
  return parts;
}

std::vector<ChatMessage> chat_turn_messages(const std::string& system, const std::vector<std::string>& images,
                                            const std::vector<std::string>& audio, const std::string& text) {
  std::vector<ChatMessage> out;
  if (!system.empty()) out.push_back({"system", {{ChatPart::Kind::Text, system, ""}}});
  ChatMessage user{"user", {}};
  for (const std::string& f : images) user.parts.push_back({ChatPart::Kind::Image, "", f});
  for (const std::string& f : audio) user.parts.push_back({ChatPart::Kind::Audio, "", f});
  for (ChatPart& p : parts_from_shorthand(text))
    if (p.kind != ChatPart::Kind::Text || !p.text.empty() || user.parts.empty()) user.parts.push_back(std::move(p));
  out.push_back(std::move(user));
  return out;
}

ChatPrompter::ChatPrompter(const ModelConfig& config, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                           std::optional<MediaLoader> media)
    : config_(config), tokenizer_(tokenizer), template_(chat_template), media_(media ? std::move(*media) : MediaLoader(config)) {}

std::string ChatPrompter::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const json& tools) const {
  if (messages.empty()) throw InputError("a chat prompt needs at least one message");
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (!tools.is_null()) o.extra_context["tools"] = tools;
  o.bos_token = piece_or_throw(tokenizer_, config_.bos_token_id, "BOS");
  if (!config_.eos_token_ids.empty()) o.eos_token = piece_or_throw(tokenizer_, config_.eos_token_ids[0], "EOS");
  return template_.render(messages_json(messages), o);
}

PromptBatch ChatPrompter::encode(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const json& tools,
                                 const std::string& reply_prefix) const {
  std::vector<ChatPart> media;
  for (const ChatMessage& m : messages)
    for (const ChatPart& p : m.parts)
      if (p.kind != ChatPart::Kind::Text) media.push_back(p);
  return expand(render(messages, add_generation_prompt, tools) + reply_prefix, media, true);
}

PromptBatch ChatPrompter::expand(const std::string& text, const std::vector<ChatPart>& media_parts, bool add_bos) const {
  const MediaMarkup markup = family_of(config_).media_markup;
  const bool begin_of_image = markup.image == MediaMarkup::Image::BeginOfImage;
  // Media in the order the messages give it; the template writes one
  // placeholder per part in that order.
  struct Media {
    ChatPart::Kind kind;
    MediaEmbeddings rows;
  };
  std::vector<Media> media;
  for (const ChatPart& p : media_parts)
    if (p.kind != ChatPart::Kind::Text) {
      const Modality kind = p.kind == ChatPart::Kind::Audio ? Modality::Audio : Modality::Image;
      media.push_back({p.kind, p.rows              ? *p.rows
                               : !p.bytes.empty() ? media_.load_bytes(p.bytes, p.path, kind)
                                                  : media_.load_file(p.path, kind)});
    }

  // The placeholder each family's template writes and the block it becomes.
  // Text that writes a placeholder itself counts too, as in HF's processor.
  size_t want_images = 0, want_audio = 0;
  for (const Media& m : media) (m.kind == ChatPart::Kind::Image ? want_images : want_audio)++;
  auto has = [&](int id) { return id >= 0 && id < tokenizer_.piece_count(); };
  std::string image_mark, audio_mark;
  if (want_images > 0 || has(begin_of_image ? config_.boi_token_id : config_.image_token_id))
    image_mark = begin_of_image ? piece_or_throw(tokenizer_, config_.boi_token_id, "begin-of-image")
                                : piece_or_throw(tokenizer_, config_.image_token_id, "image soft");
  if (want_audio > 0 && !markup.audio) throw InputError("this model (" + config_.model_type + ") takes no audio");
  if (want_audio > 0 || (markup.audio && has(config_.audio_token_id)))
    audio_mark = piece_or_throw(tokenizer_, config_.audio_token_id, "audio soft");
  if (!image_mark.empty() && count_of(text, image_mark) != want_images)
    throw InputError("the prompt holds " + std::to_string(count_of(text, image_mark)) + " image placeholders (" + image_mark +
                     ") for " + std::to_string(want_images) +
                     " image parts (text must not write them; the template must place every image)");
  if (!audio_mark.empty() && count_of(text, audio_mark) != want_audio)
    throw InputError("the prompt holds " + std::to_string(count_of(text, audio_mark)) + " audio placeholders (" + audio_mark +
                     ") for " + std::to_string(want_audio) +
                     " audio parts (text must not write them; the template must place every clip)");

  // Expand placeholders left to right; each takes the next media of its kind.
  std::string expanded;
  std::vector<float> rows;
  size_t next_image = 0, next_audio = 0, at = 0;
  auto next_of = [&](ChatPart::Kind kind, size_t& from) -> Media& {
    while (media[from].kind != kind) ++from;
    return media[from++];
  };
  for (;;) {
    const size_t i = image_mark.empty() ? std::string::npos : text.find(image_mark, at);
    const size_t a = audio_mark.empty() ? std::string::npos : text.find(audio_mark, at);
    const size_t hit = std::min(i, a);
    if (hit == std::string::npos) break;
    expanded += text.substr(at, hit - at);
    const bool image = hit == i;
    Media& m = next_of(image ? ChatPart::Kind::Image : ChatPart::Kind::Audio, image ? next_image : next_audio);
    // Pan-and-scan (Gemma-3): the rows are the original's block, then each crop's.
    const int64_t crops = m.rows.crops;
    if (crops < 0 || (crops > 0 && !(image && markup.pan_and_scan)))
      throw InputError("pan-and-scan crops are a Gemma-3 image option, not for this " + config_.model_type + " " +
                       (image ? "image" : "audio"));
    const int64_t blocks = 1 + crops;
    const int64_t n = m.rows.rows / blocks;
    if (image && markup.fixed_image_tokens && m.rows.rows != blocks * config_.mm_tokens_per_image)
      throw InputError("an image for " + config_.model_type + " must have mm_tokens_per_image = " +
                       std::to_string(config_.mm_tokens_per_image) + " embedding rows" +
                       (crops > 0 ? " per image (1 + " + std::to_string(crops) + " crops)" : std::string()) + ", got " +
                       std::to_string(m.rows.rows));
    std::string soft, begin, end;
    if (image) {
      soft = piece_or_throw(tokenizer_, config_.image_token_id, "image soft");
      begin = piece_or_throw(tokenizer_, config_.boi_token_id, "begin-of-image");
      end = piece_or_throw(tokenizer_, config_.eoi_token_id, "end-of-image");
    } else {
      soft = audio_mark;
      begin = piece_or_throw(tokenizer_, config_.boa_token_id, "begin-of-audio");
      end = piece_or_throw(tokenizer_, config_.eoa_token_id, "end-of-audio");
    }
    std::string block = begin;
    block.reserve(begin.size() + size_t(n) * soft.size() + end.size() + 4);
    for (int64_t k = 0; k < n; ++k) block += soft;
    block += end;
    if (image && markup.image_block_between_blank_lines) block = "\n\n" + block + "\n\n";
    if (crops == 0) {
      expanded += block;
    } else {
      // HF's processor writes this text around the placeholders, then expands each one.
      expanded += "Here is the original image " + block + " and here are some crops to help you see better ";
      for (int64_t k = 0; k < crops; ++k) expanded += (k == 0 ? "" : " ") + block;
    }
    if (rows.empty()) rows = std::move(m.rows.data);  // the first block's rows move, not copy
    else rows.insert(rows.end(), m.rows.data.begin(), m.rows.data.end());
    at = hit + (image ? image_mark.size() : audio_mark.size());
  }
  expanded += text.substr(at);

  // HF adds BOS (Gemma's post-processor) unless the rendered text starts with it.
  PromptBatch p;
  p.batch = 1;
  // The BOS the template writes is taken as the id itself: SentencePiece
  // would read the control piece "<bos>" in text as plain characters.
  const std::string bos = piece_or_throw(tokenizer_, config_.bos_token_id, "BOS");
  const bool written = expanded.rfind(bos, 0) == 0;
  if (written || add_bos) p.tokens.push_back(config_.bos_token_id);
  for (int id : tokenizer_.encode(expanded.substr(written ? bos.size() : 0))) p.tokens.push_back(id);
  for (int id : p.tokens) {
    Modality m = Modality::Text;
    if (id == config_.image_token_id) m = Modality::Image;
    else if (id == config_.video_token_id) m = Modality::Video;
    else if (id == config_.audio_token_id) m = Modality::Audio;
    p.modality.push_back(m);
  }
  const int64_t soft_tokens = std::count_if(p.modality.begin(), p.modality.end(), [](Modality m) { return m != Modality::Text; });
  if (soft_tokens * config_.hidden_size != int64_t(rows.size()))
    throw InputError("the prompt holds " + std::to_string(soft_tokens) + " media soft tokens but the media give " +
                     std::to_string(rows.size() / size_t(config_.hidden_size)) +
                     " rows; the text must not write soft tokens itself");
  p.seq = int(p.tokens.size());
  p.attention_mask.assign(p.tokens.size(), 1);
  p.media = std::move(rows);
  validate_prompt_batch(p, config_);
  return p;
}

}  // namespace splitdec
