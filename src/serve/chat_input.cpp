#include "serve/chat_input.h"

#include "io/model_config.h"
#include "io/tokenizer.h"
#include "core/error.h"
#include "prompt/chat_prompt.h"
#include "prompt/prompt_text.h"
#include "serve/api_error.h"

namespace splitdec::serve {

namespace {

// One prompt row: BOS, then text (a media soft token in it is refused).
class PromptBuilder {
 public:
  PromptBuilder(const Tokenizer& tok, const ModelConfig& c) : tok_(tok), c_(c), special_(SpecialTokens::resolve(c, tok)) {
    push(SpecialTokens::require(special_.bos, "BOS"), Modality::Text);
  }
  void text(const std::string& s) { pending_ += s; }
  PromptBatch finish() {
    flush();
    p_.batch = 1;
    p_.seq = int(p_.tokens.size());
    p_.attention_mask.assign(p_.tokens.size(), 1);
    validate_prompt_batch(p_, c_);
    return std::move(p_);
  }

 private:
  // Text is tokenized in runs between media blocks (fewer seams than per piece).
  void flush() {
    if (pending_.empty()) return;
    for (int id : tok_.encode(pending_)) {
      if (id == c_.image_token_id || id == c_.audio_token_id || id == c_.video_token_id)
        throw ApiError(400, "message text contains a media soft token; send media as content parts", "messages");
      push(id, Modality::Text);
    }
    pending_.clear();
  }
  void push(int id, Modality m) {
    p_.tokens.push_back(id);
    p_.modality.push_back(m);
  }
  const Tokenizer& tok_;
  const ModelConfig& c_;
  SpecialTokens special_;
  PromptBatch p_;
  std::string pending_;
};

std::string text_only(const ChatMessage& m, size_t index) {
  std::string s;
  for (const MessagePart& part : m.parts) {
    if (part.kind != Modality::Text)
      throw ApiError(400, "messages[" + std::to_string(index) + "]: a " + m.role + " message may hold text only", "messages");
    s += part.text;
  }
  return s;
}

}  // namespace

PromptBatch chat_prompt(const std::vector<ChatMessage>& messages, const Tokenizer& tok, const ModelConfig& c,
                        const ChatTemplate& chat_template) {
  if (messages.empty()) throw ApiError(400, "messages must hold at least one message", "messages");
  std::vector<splitdec::ChatMessage> chat;
  bool expect_user = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    splitdec::ChatMessage out{m.role == "developer" ? "system" : m.role, {}};
    if (m.role == "system" || m.role == "developer") {
      if (i != 0) throw ApiError(400, where + ": a system message may only come first", "messages");
      out.parts.push_back({ChatPart::Kind::Text, text_only(m, i), "", nullptr});
    } else if (m.role == "user") {
      if (!expect_user) throw ApiError(400, where + ": roles must alternate user/assistant after the system message", "messages");
      for (const MessagePart& part : m.parts) {
        if (part.kind == Modality::Text) {
          out.parts.push_back({ChatPart::Kind::Text, part.text, "", nullptr});
        } else {
          const auto kind = part.kind == Modality::Audio ? ChatPart::Kind::Audio : ChatPart::Kind::Image;
          out.parts.push_back({kind, "", "", std::make_shared<const MediaEmbeddings>(part.media)});
        }
      }
      if (out.parts.empty()) out.parts.push_back({ChatPart::Kind::Text, "", "", nullptr});
      expect_user = false;
    } else if (m.role == "assistant") {
      if (expect_user) throw ApiError(400, where + ": roles must alternate user/assistant after the system message", "messages");
      out.parts.push_back({ChatPart::Kind::Text, text_only(m, i), "", nullptr});
      expect_user = true;
    } else {
      throw ApiError(400, where + ": unknown role '" + m.role + "' (expected system, user or assistant)", "messages");
    }
    chat.push_back(std::move(out));
  }
  if (expect_user) throw ApiError(400, "the last message must be the user's (the reply continues after it)", "messages");
  try {
    return ChatPrompter(c, tok, chat_template).encode(chat, true);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {  // the template's own refusals, media that does not fit the model
    throw ApiError(400, e.what(), "messages");
  }
}

PromptBatch text_prompt(const std::string& text, const Tokenizer& tok, const ModelConfig& c) {
  PromptBuilder b(tok, c);
  b.text(text);
  return b.finish();
}

}  // namespace splitdec::serve
