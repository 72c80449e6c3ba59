#include "prompt/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"

namespace splitdec {
namespace {

namespace fs = std::filesystem;

// splitdec's own Gemma-3 chat form, for checkpoints without a template:
// turns framed by <start_of_turn>ROLE\n ... <end_of_turn>\n, the assistant
// named "model", a system message folded into the first turn, an image part
// as <start_of_image>; roles must alternate user/assistant.
const std::string kGemma3 = R"JINJA({#- splitdec built-in chat template: Gemma-3 -#}
{{- bos_token -}}
{%- set turns = messages -%}
{%- set system_text = '' -%}
{%- if messages | length > 0 and messages[0].role == 'system' -%}
  {%- set head = messages[0].content -%}
  {%- set system_text = (head if head is string else head[0].text) ~ '\n\n' -%}
  {%- set turns = messages[1:] -%}
{%- endif -%}
{%- for turn in turns -%}
  {%- if (turn.role == 'user') != (loop.index0 % 2 == 0) -%}
    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
  {%- endif -%}
  {{- '<start_of_turn>' ~ ('model' if turn.role == 'assistant' else turn.role) ~ '\n' -}}
  {%- if loop.first -%}{{- system_text -}}{%- endif -%}
  {%- if turn.content is string -%}
    {{- turn.content | trim -}}
  {%- elif turn.content is iterable -%}
    {%- for part in turn.content -%}
      {%- if part.type == 'image' -%}
        {{- '<start_of_image>' -}}
      {%- elif part.type == 'text' -%}
        {{- part.text | trim -}}
      {%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {{- raise_exception('Invalid content type') -}}
  {%- endif -%}
  {{- '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)JINJA";

// splitdec's own Gemma-4 chat form: turns framed by <|turn>ROLE\n ...
// <turn|>\n; a leading system/developer message, and the <|think|> switch
// when enable_thinking is set, make a system turn; a model turn drops its
// thoughts (<|channel>...<channel|>); images and video sit between blank
// lines, audio inline; the generation prompt closes an empty thought
// channel unless thinking is on. Tools are the checkpoint template's job.
const std::string kGemma4 = R"JINJA({#- splitdec built-in chat template: Gemma-4 -#}
{%- macro visible_reply(text) -%}
  {%- set kept = namespace(text='') -%}
  {%- for piece in text.split('<channel|>') -%}
    {%- set kept.text = kept.text ~ piece.split('<|channel>')[0] -%}
  {%- endfor -%}
  {{- kept.text | trim -}}
{%- endmacro -%}
{%- if tools -%}
  {{- raise_exception("splitdec's built-in gemma4 template does not format tools") -}}
{%- endif -%}
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{%- set opens_with_system = messages | length > 0 and messages[0].role in ['system', 'developer'] -%}
{%- set turns = messages[1:] if opens_with_system else messages -%}
{{- bos_token -}}
{%- if thinking or opens_with_system -%}
  {{- '<|turn>system\n' -}}
  {%- if thinking -%}{{- '<|think|>' -}}{%- endif -%}
  {%- if opens_with_system -%}{{- messages[0].content | trim -}}{%- endif -%}
  {{- '<turn|>\n' -}}
{%- endif -%}
{%- for turn in turns -%}
  {%- if turn.tool_calls or turn.tool_responses -%}
    {{- raise_exception("splitdec's built-in gemma4 template does not format tool calls") -}}
  {%- endif -%}
  {%- set role = 'model' if turn.role == 'assistant' else turn.role -%}
  {{- '<|turn>' ~ role ~ '\n' -}}
  {%- if turn.content is string -%}
    {{- visible_reply(turn.content) if role == 'model' else turn.content | trim -}}
  {%- elif turn.content is sequence -%}
    {%- for part in turn.content -%}
      {%- if part.type == 'text' -%}
        {{- visible_reply(part.text) if role == 'model' else part.text | trim -}}
      {%- elif part.type == 'image' -%}
        {{- '\n\n<|image|>\n\n' -}}
      {%- elif part.type == 'audio' -%}
        {{- '<|audio|>' -}}
      {%- elif part.type == 'video' -%}
        {{- '\n\n<|video|>\n\n' -}}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {{- '<turn|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|turn>model\n' -}}
  {%- if not thinking -%}{{- '<|channel>thought\n<channel|>' -}}{%- endif -%}
{%- endif -%}
)JINJA";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json read_json(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// "chat_template" as tokenizer_config.json or chat_template.json holds it:
// a string, or a list of {name, template} whose "default" entry is used.
std::optional<std::string> template_field(const nlohmann::json& config, const fs::path& path) {
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return std::nullopt;
  const auto& field = config["chat_template"];
  if (field.is_string()) return field.get<std::string>();
  if (field.is_array()) {
    for (const auto& entry : field)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    throw FormatError(path.string() + ": \"chat_template\" lists named templates but none named \"default\"");
  }
  throw FormatError(path.string() + ": \"chat_template\" is neither a string nor a list of {name, template}");
}

// A special token as tokenizer_config.json writes it: "<bos>" or {"content": "<bos>", ...}.
std::optional<std::string> token_field(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

const std::string& ChatTemplate::builtin_source(const std::string& family) {
  if (family == "gemma3") return kGemma3;
  if (family == "gemma4") return kGemma4;
  throw ConfigError("chat template: unknown model family '" + family + "' (expected gemma3 or gemma4)");
}

ChatTemplate::ChatTemplate(std::string source, std::string origin, bool builtin)
    : source_(std::move(source)), origin_(std::move(origin)), builtin_(builtin), template_(source_) {}

ChatTemplate ChatTemplate::from_source(std::string source) { return ChatTemplate(std::move(source), "source", false); }

ChatTemplate ChatTemplate::builtin(const std::string& family) {
  return ChatTemplate(builtin_source(family), "built-in " + family, true);
}

ChatTemplate ChatTemplate::from_model_dir(const fs::path& dir, const std::string& family) {
  builtin_source(family);  // refuses an unknown family whatever the folder holds
  if (is_gguf_path(dir.string())) {
    // A GGUF: tokenizer.chat_template, and the pieces of its BOS / EOS ids.
    const auto gguf = GgufFile::open(dir.string());
    std::optional<ChatTemplate> found;
    if (auto text = gguf->string("tokenizer.chat_template")) found.emplace(ChatTemplate(std::move(*text), dir.string() + " (tokenizer.chat_template)", false));
    else found.emplace(builtin(family));
    const std::vector<std::string_view> tokens = gguf->strings("tokenizer.ggml.tokens");
    auto piece = [&](const char* key, std::string& out) {
      const std::optional<int64_t> id = gguf->integer(key);
      if (id && *id >= 0 && size_t(*id) < tokens.size()) out = std::string(tokens[size_t(*id)]);
    };
    piece("tokenizer.ggml.bos_token_id", found->default_bos_);
    piece("tokenizer.ggml.eos_token_id", found->default_eos_);
    return std::move(*found);
  }
  const fs::path config_path = dir / "tokenizer_config.json";
  const nlohmann::json config = fs::exists(config_path) ? read_json(config_path) : nlohmann::json::object();
  std::optional<ChatTemplate> found;
  if (const fs::path jinja_path = dir / "chat_template.jinja"; fs::exists(jinja_path)) {
    found.emplace(ChatTemplate(read_text(jinja_path), jinja_path.string(), false));
  } else if (auto text = template_field(config, config_path)) {
    found.emplace(ChatTemplate(std::move(*text), config_path.string(), false));
  } else if (const fs::path json_path = dir / "chat_template.json"; fs::exists(json_path)) {
    if (auto processor_text = template_field(read_json(json_path), json_path))
      found.emplace(ChatTemplate(std::move(*processor_text), json_path.string(), false));
  }
  if (!found) found.emplace(builtin(family));
  if (auto bos = token_field(config, "bos_token")) found->default_bos_ = *bos;
  if (auto eos = token_field(config, "eos_token")) found->default_eos_ = *eos;
  return std::move(*found);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const ChatRenderOptions& options) const {
  if (!messages.is_array()) throw InputError("chat template: messages must be a JSON array");
  if (!options.extra_context.is_null() && !options.extra_context.is_object())
    throw InputError("chat template: extra_context must be a JSON object");
  nlohmann::json context = options.extra_context.is_object() ? options.extra_context : nlohmann::json::object();
  context["messages"] = messages;
  context["bos_token"] = options.bos_token.value_or(default_bos_);
  context["eos_token"] = options.eos_token.value_or(default_eos_);
  context["add_generation_prompt"] = options.add_generation_prompt;
  return template_.render(context);
}

}  // namespace splitdec
