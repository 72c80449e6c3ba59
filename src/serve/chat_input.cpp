#include "serve/chat_input.h"

#include <map>

#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "core/error.h"
#include "prompt/chat_prompt.h"
#include "prompt/prompt_text.h"
#include "prompt/tool_call_format.h"
#include "serve/api_error.h"
#include "serve/json_limits.h"

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

// JSON a client wrote inside a string (tool arguments, a tool's answer),
// parsed only within the body's own limits (nesting, values): deeper text
// stays a string.
nlohmann::json parse_within_limits(const std::string& text) {
  try {
    check_json_limits(text, JsonLimits{});
  } catch (const ApiError&) {
    return nlohmann::json::value_t::discarded;
  }
  return nlohmann::json::parse(text, nullptr, false);
}

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

std::string tool_reply_prefix(const ToolUse& tools) {
  if (tools.tools.is_null() || tools.choice == "none" || tools.choice == "auto") return "";
  return std::string(kToolCallOpen) + (tools.choice == "function" ? tools.function + "{" : "");
}

PromptBatch chat_prompt(const std::vector<ChatMessage>& messages, const Tokenizer& tok, const ModelConfig& c,
                        const ChatTemplate& chat_template, const ToolUse& tools) {
  if (messages.empty()) throw ApiError(400, "messages must hold at least one message", "messages");
  // Tool history is read whenever the request has tools; the tools are
  // offered (rendered) unless tool_choice is "none".
  const bool has_tools = !tools.tools.is_null();
  const bool with_tools = has_tools && tools.choice != "none";
  if (has_tools && chat_template.source().find("tools") == std::string::npos)
    throw ApiError(400, "tools: this model's chat template (" + chat_template.origin() + ") does not format tools", "tools");
  std::vector<splitdec::ChatMessage> chat;
  bool expect_user = true;
  // The calls of the last assistant message, by id: the tool messages after it answer them.
  std::map<std::string, std::string> open_calls;
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
      open_calls.clear();
    } else if (m.role == "assistant") {
      // Right after the tools' answers (the turn that called them is still open).
      const bool after_tools = !open_calls.empty() && chat.back().fields.contains("tool_responses");
      if (expect_user && !after_tools)
        throw ApiError(400, where + ": roles must alternate user/assistant after the system message", "messages");
      const std::string text = text_only(m, i);
      if (after_tools && m.tool_calls.is_null()) {
        // The answer after the tools' responses: the same model turn goes on, and ends.
        chat.back().parts[0].text += text;
        open_calls.clear();
        expect_user = true;
        continue;
      }
      out.parts.push_back({ChatPart::Kind::Text, text, "", nullptr});
      open_calls.clear();
      if (!m.tool_calls.is_null()) {
        if (!has_tools) throw ApiError(400, where + ".tool_calls: the request has no tools", "messages");
        nlohmann::json calls = nlohmann::json::array();
        for (const nlohmann::json& call : m.tool_calls) {
          nlohmann::json f = call["function"];
          // The template writes arguments given as a mapping in its own form.
          const std::string args = f.value("arguments", "{}");
          const nlohmann::json parsed = parse_within_limits(args);
          f["arguments"] = parsed.is_object() ? parsed : nlohmann::json(args);
          calls.push_back({{"id", call["id"]}, {"type", "function"}, {"function", f}});
          open_calls[call["id"].get<std::string>()] = f["name"].get<std::string>();
        }
        out.fields["tool_calls"] = std::move(calls);
      }
      expect_user = true;
    } else if (m.role == "tool") {
      if (chat.empty() || chat.back().role != "assistant" || !chat.back().fields.contains("tool_calls"))
        throw ApiError(400, where + ": a tool message must follow an assistant message with tool_calls", "messages");
      const auto call = open_calls.find(m.tool_call_id);
      if (call == open_calls.end())
        throw ApiError(400, where + ".tool_call_id: '" + m.tool_call_id + "' is not a call of the assistant message before it", "messages");
      const std::string text = text_only(m, i);
      const nlohmann::json parsed = parse_within_limits(text);
      chat.back().fields["tool_responses"].push_back(
          {{"name", call->second}, {"response", parsed.is_discarded() ? nlohmann::json(text) : parsed}});
      continue;
    } else {
      throw ApiError(400, where + ": unknown role '" + m.role + "' (expected system, user, assistant or tool)", "messages");
    }
    chat.push_back(std::move(out));
  }
  const bool ends_with_tools = !chat.empty() && chat.back().role == "assistant" && chat.back().fields.contains("tool_responses") &&
                               messages.back().role == "tool";
  if (expect_user && !ends_with_tools)
    throw ApiError(400, "the last message must be the user's or a tool's (the reply continues after it)", "messages");
  try {
    return ChatPrompter(c, tok, chat_template).encode(chat, true, with_tools ? tools.tools : nlohmann::json(), tool_reply_prefix(tools));
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
