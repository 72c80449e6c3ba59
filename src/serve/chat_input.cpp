#include "serve/chat_input.h"

#include "io/model_config.h"
#include "io/tokenizer.h"
#include "prompt/prompt_text.h"
#include "serve/api_error.h"

namespace splitdec::serve {

namespace {

// Appends tokens and media blocks to one prompt row.
class PromptBuilder {
 public:
  PromptBuilder(const Tokenizer& tok, const ModelConfig& c) : tok_(tok), c_(c), special_(SpecialTokens::resolve(c, tok)) {
    push(SpecialTokens::require(special_.bos, "BOS"), Modality::Text);
  }
  void text(const std::string& s) { pending_ += s; }
  void media(const MediaEmbeddings& m, Modality kind) {
    flush();
    const PromptBatch block = media_prompt(special_, m.data, m.rows, kind);
    for (int i = 0; i < block.seq; ++i) push(block.tokens[size_t(i)], block.modality[size_t(i)]);
    p_.media.insert(p_.media.end(), block.media.begin(), block.media.end());
  }
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

PromptBatch chat_prompt(const std::vector<ChatMessage>& messages, const Tokenizer& tok, const ModelConfig& c) {
  if (messages.empty()) throw ApiError(400, "messages must hold at least one message", "messages");
  // The user turn's frame from the existing Gemma form: the text goes where the marker is.
  const std::string marker = "\x1f";
  PromptBuilder b(tok, c);
  std::string system;
  bool first_turn = true, expect_user = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (m.role == "system" || m.role == "developer") {
      if (i != 0) throw ApiError(400, where + ": a system message may only come first", "messages");
      system = text_only(m, i);
    } else if (m.role == "user") {
      if (!expect_user) throw ApiError(400, where + ": roles must alternate user/assistant after the system message", "messages");
      const std::string frame = chat_user_turn(marker, first_turn, /*reply_closed=*/true);
      const size_t at = frame.find(marker);
      b.text(frame.substr(0, at));
      if (first_turn && !system.empty()) b.text(system + "\n\n");
      for (const MessagePart& part : m.parts) {
        if (part.kind == Modality::Text) b.text(part.text);
        else b.media(part.media, part.kind);
      }
      b.text(frame.substr(at + marker.size()));
      first_turn = false;
      expect_user = false;
    } else if (m.role == "assistant") {
      if (expect_user) throw ApiError(400, where + ": roles must alternate user/assistant after the system message", "messages");
      b.text(text_only(m, i) + "<end_of_turn>");
      expect_user = true;
    } else {
      throw ApiError(400, where + ": unknown role '" + m.role + "' (expected system, user or assistant)", "messages");
    }
  }
  if (expect_user) throw ApiError(400, "the last message must be the user's (the reply continues after it)", "messages");
  return b.finish();
}

PromptBatch text_prompt(const std::string& text, const Tokenizer& tok, const ModelConfig& c) {
  PromptBuilder b(tok, c);
  b.text(text);
  return b.finish();
}

}  // namespace splitdec::serve
