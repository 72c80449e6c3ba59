#include "serve/completion_request.h"

#include <nlohmann/json.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "core/error.h"
#include "generate/json_schema.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "media/frontend_config.h"
#include "media/media_frontend.h"
#include "media/media_loader.h"
#include "serve/api_error.h"
#include "serve/chat_input.h"
#include "serve/media_input.h"

namespace splitdec::serve {

using nlohmann::json;

namespace {

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

ApiError wrong_type(const std::string& param, const char* want, const json& got) {
  return bad_field(param, param + ": expected " + std::string(want) + ", got " + type_name(got));
}

// Optional fields: absent or null means "not given".
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// 1, 0.001, 100 (json's dump writes 1.0).
std::string short_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

// Whether an end of a range is included: top_p is (0, 1], min_p [0, 1).
enum class End { kClosed, kOpen };

std::optional<double> number(const json& body, const char* name, double lo, double hi, End lo_end = End::kClosed,
                             End hi_end = End::kClosed) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  const bool above_lo = lo_end == End::kOpen ? x > lo : x >= lo;
  const bool below_hi = hi_end == End::kOpen ? x < hi : x <= hi;
  if (!(above_lo && below_hi))
    throw bad_field(name, std::string(name) + ": " + v->dump() + " is out of range " +
                              (lo_end == End::kOpen ? "(" : "[") + short_number(lo) + ", " + short_number(hi) +
                              (hi_end == End::kOpen ? ")" : "]"));
  return x;
}

ApiError not_an_integer_in(const std::string& name, const json& v, const std::string& lo, const std::string& hi) {
  return bad_field(name, name + ": " + v.dump() + " is not an integer in [" + lo + ", " + hi + "]");
}

// JSON has one number type: a value past 2^64-1 (or written as 1e3 or 5.0)
// parses as a float. Such a number is reported with the field's range, not
// as the wrong type.
void require_integer(const std::string& name, const json& v, const std::string& lo, const std::string& hi) {
  if (v.is_number_float()) throw not_an_integer_in(name, v, lo, hi);
  if (!v.is_number_integer()) throw wrong_type(name, "an integer", v);
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  const std::string lo_text = std::to_string(lo), hi_text = std::to_string(hi);
  require_integer(name, *v, lo_text, hi_text);
  // Large unsigned values do not fit int64: compare as unsigned first.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi)) throw not_an_integer_in(name, *v, lo_text, hi_text);
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw not_an_integer_in(name, *v, lo_text, hi_text);
  return x;
}

// The whole uint64 range: the sampler's generator takes 64 bits.
std::optional<uint64_t> unsigned64(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  const std::string hi = std::to_string(UINT64_MAX);
  require_integer(name, *v, "0", hi);
  if (!v->is_number_unsigned()) throw not_an_integer_in(name, *v, "0", hi);  // negative
  return v->get<uint64_t>();
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

// OpenAI's logit_bias: {"token id": bias}, each id in the model's
// vocabulary and each bias in [-100, 100].
std::map<int, float> logit_bias(const json& body, int vocab_size) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw wrong_type("logit_bias", "an object mapping token ids to biases", *v);
  std::map<int, float> out;
  for (const auto& [key, bias] : v->items()) {
    const std::string where = "logit_bias[\"" + key + "\"]";
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id >= vocab_size)
      throw bad_field("logit_bias", "logit_bias: key '" + key + "' is not a token id in the vocabulary [0, " +
                                        std::to_string(vocab_size) + ")");
    if (!bias.is_number()) throw bad_field("logit_bias", where + ": expected a number, got " + type_name(bias));
    const double b = bias.get<double>();
    if (!(b >= -100 && b <= 100)) throw bad_field("logit_bias", where + ": " + bias.dump() + " is out of range [-100, 100]");
    out[int(id)] = float(b);
  }
  return out;
}

SamplingOptions sampling(const json& body, int vocab_size, const GenerationDefaults& d) {
  SamplingOptions s;
  // A field left out: the model's generation_config.json (as vLLM), then
  // OpenAI's default (temperature 1; 0 asks for greedy decoding).
  s.temperature = float(number(body, "temperature", 0, 2).value_or(d.temperature.value_or(1.f)));
  // Each range is the sampler's (SamplingOptions::validate), checked here so
  // that the error names the field.
  s.top_p = float(number(body, "top_p", 0, 1, End::kOpen).value_or(d.top_p.value_or(1.f)));
  s.top_k = int(integer(body, "top_k", 0, 1 << 30).value_or(d.top_k.value_or(0)));
  s.min_p = float(number(body, "min_p", 0, 1, End::kClosed, End::kOpen).value_or(d.min_p.value_or(0.f)));
  s.repetition_penalty = float(number(body, "repetition_penalty", 1e-3, 100).value_or(d.repetition_penalty.value_or(1.f)));
  s.presence_penalty = float(number(body, "presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = float(number(body, "frequency_penalty", -2, 2).value_or(0.0));
  s.logit_bias = logit_bias(body, vocab_size);
  if (const auto seed = unsigned64(body, "seed")) {
    s.seed = *seed;
  } else {
    static std::random_device device;
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    s.seed = (uint64_t(device()) << 32) | device();
  }
  s.sample = s.temperature > 0;
  try {
    s.validate();  // the checks above cover it; a miss is still a 400, naming no field rather than a wrong one
  } catch (const Error& e) {
    throw bad_field("", e.what());
  }
  try {
    s.check_vocabulary(vocab_size);  // what logit_bias() left: a bias that bans every token
  } catch (const Error& e) {
    throw bad_field("logit_bias", e.what());
  }
  return s;
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) out.push_back(v->get<std::string>());
  else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) throw wrong_type("stop", "a string or a list of strings", s);
      out.push_back(s.get<std::string>());
    }
  } else {
    throw wrong_type("stop", "a string or a list of strings", *v);
  }
  if (out.size() > 4) throw bad_field("stop", "stop: at most 4 sequences (got " + std::to_string(out.size()) + ")");
  for (const std::string& s : out)
    if (s.empty()) throw bad_field("stop", "stop: an empty string would stop at once");
  return out;
}

// How many alternatives each token's log probability comes with (-1: none
// asked for). Chat: `logprobs` a boolean, `top_logprobs` 0-20 beside it;
// /v1/completions: `logprobs` itself the count, 0-5 (OpenAI's limits).
int top_logprobs(const json& body, bool chat) {
  if (chat) {
    const bool on = boolean(body, "logprobs").value_or(false);
    const auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !on) throw bad_field("top_logprobs", "top_logprobs: needs logprobs: true");
    return on ? int(top.value_or(0)) : -1;
  }
  const json* v = field(body, "logprobs");
  if (!v || (v->is_boolean() && !v->get<bool>())) return -1;
  if (field(body, "top_logprobs")) throw bad_field("top_logprobs", "top_logprobs: a chat field; /v1/completions takes the count in logprobs");
  return int(*integer(body, "logprobs", 0, 5));
}

// Features of the API this server does not implement: refused, not ignored.
void refuse_unsupported(const json& body, bool chat, int n) {
  if (!chat) {
    // best_of generates that many and returns the n with the highest mean
    // log probability per token: only best_of = n (no ranking) is implemented.
    if (const auto best_of = integer(body, "best_of", 1, 128); best_of && *best_of != n)
      throw bad_field("best_of", "best_of: only best_of equal to n (" + std::to_string(n) + ") is supported (got " +
                                     std::to_string(*best_of) + ")");
    if (const json* suffix = field(body, "suffix")) {
      if (!suffix->is_string()) throw wrong_type("suffix", "a string", *suffix);
      if (!suffix->get_ref<const std::string&>().empty())
        throw bad_field("suffix", "suffix: not supported (Gemma models have no fill-in-the-middle)");
    }
  }
  for (const char* name : {"functions", "function_call"})
    if (field(body, name)) throw bad_field(name, std::string(name) + ": the legacy form is not supported; use tools and tool_choice");
  if (!chat)
    for (const char* name : {"tools", "tool_choice"})
      if (field(body, name)) throw bad_field(name, std::string(name) + ": a chat field (/v1/chat/completions)");
}

// OpenAI's tools: [{"type": "function", "function": {"name", "description",
// "parameters"}}], and tool_choice: "none" | "auto" | "required" |
// {"type": "function", "function": {"name"}}.
ToolUse tool_use(const json& body) {
  ToolUse t;
  const json* tools = field(body, "tools");
  if (tools) {
    if (!tools->is_array()) throw wrong_type("tools", "an array of {\"type\": \"function\", \"function\": {...}}", *tools);
    if (tools->size() > 128) throw bad_field("tools", "tools: at most 128 (got " + std::to_string(tools->size()) + ")");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& tool = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") || !tool["function"].is_object())
        throw bad_field("tools", where + ": expected {\"type\": \"function\", \"function\": {...}}");
      const json& f = tool["function"];
      const json* name = field(f, "name");
      if (!name || !name->is_string() || name->get<std::string>().empty() || name->get<std::string>().size() > 64 ||
          name->get<std::string>().find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
              std::string::npos)
        throw bad_field("tools", where + ".function.name: 1 to 64 letters, digits, '_' or '-'");
      if (!names.insert(name->get<std::string>()).second)
        throw bad_field("tools", where + ".function.name: '" + name->get<std::string>() + "' is listed twice");
      if (const json* d = field(f, "description"); d && !d->is_string()) throw wrong_type(where + ".function.description", "a string", *d);
      if (const json* p = field(f, "parameters"); p && !p->is_object())
        throw wrong_type(where + ".function.parameters", "a JSON schema object", *p);
    }
    if (!tools->empty()) t.tools = *tools;
  }
  const json* choice = field(body, "tool_choice");
  if (!choice) return t;
  if (choice->is_string()) {
    t.choice = choice->get<std::string>();
    if (t.choice != "none" && t.choice != "auto" && t.choice != "required")
      throw bad_field("tool_choice", "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", ...}, got \"" + t.choice + "\"");
  } else if (choice->is_object() && choice->value("type", "") == "function" && choice->contains("function") &&
             (*choice)["function"].is_object() && (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
    t.choice = "function";
    t.function = (*choice)["function"]["name"].get<std::string>();
    bool listed = false;
    if (!t.tools.is_null())
      for (const json& tool : t.tools) listed |= tool["function"]["name"] == t.function;
    if (!listed) throw bad_field("tool_choice", "tool_choice: function '" + t.function + "' is not among tools");
  } else {
    throw bad_field("tool_choice", "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (t.tools.is_null() && t.choice != "none") throw bad_field("tool_choice", "tool_choice: \"" + t.choice + "\" needs tools");
  return t;
}

// OpenAI's response_format: "text" (the default), "json_object" (any JSON
// object) or "json_schema" ({"json_schema": {"name", "schema", "strict"}}).
// null: no constraint.
std::shared_ptr<const JsonGrammar> response_format(const json& body, const std::string& body_text) {
  const json* rf = field(body, "response_format");
  if (!rf) return nullptr;
  if (!rf->is_object()) throw wrong_type("response_format", "an object", *rf);
  const json* type = field(*rf, "type");
  const std::string t = type && type->is_string() ? type->get<std::string>() : "";
  if (t == "text") return nullptr;
  if (t == "json_object") return std::make_shared<const JsonGrammar>(any_json_object_grammar());
  if (t != "json_schema")
    throw bad_field("response_format", "response_format.type: expected \"text\", \"json_object\" or \"json_schema\"" +
                                           (type ? ", got " + type->dump() : std::string()));
  const json* js = field(*rf, "json_schema");
  if (!js || !js->is_object())
    throw bad_field("response_format", "response_format.json_schema: expected an object with the schema in \"schema\"");
  if (const json* name = field(*js, "name"); name && !name->is_string())
    throw wrong_type("response_format.json_schema.name", "a string", *name);
  if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
    throw wrong_type("response_format.json_schema.strict", "a boolean", *strict);
  if (!field(*js, "schema")) throw bad_field("response_format", "response_format.json_schema.schema: missing");
  // The schema again from an order-keeping parse: properties are generated
  // in the order the client wrote them.
  const auto ordered = nlohmann::ordered_json::parse(body_text);
  try {
    return std::make_shared<const JsonGrammar>(
        compile_json_schema(ordered["response_format"]["json_schema"]["schema"], "response_format.json_schema.schema"));
  } catch (const InputError& e) {
    throw bad_field("response_format", e.what());
  }
}

MessagePart media_part(const json& part, const std::string& param, const RequestContext& ctx) {
  const std::string type = part["type"].get<std::string>();
  MessagePart out;
  if (type == "image_url") {
    const json* iu = field(part, "image_url");
    if (!iu) throw bad_field(param, param + ": an image_url part needs an image_url field");
    const json* url = iu->is_object() ? field(*iu, "url") : iu;
    if (!url || !url->is_string()) throw bad_field(param, param + ".image_url.url: expected a string");
    out.kind = Modality::Image;
    out.media = media_from_data_url(url->get<std::string>(), ctx.media, Modality::Image, param + ".image_url");
  } else if (type == "input_audio") {
    const json* ia = field(part, "input_audio");
    const json* data = ia && ia->is_object() ? field(*ia, "data") : nullptr;
    if (!data || !data->is_string()) throw bad_field(param, param + ".input_audio.data: expected a base64 string");
    out.kind = Modality::Audio;
    out.media = media_from_data_url("data:application/octet-stream;base64," + data->get<std::string>(), ctx.media,
                                    Modality::Audio, param + ".input_audio");
  } else if (type == "image" || type == "audio") {
    const json* path = field(part, "path");
    if (!path || !path->is_string()) throw bad_field(param, param + ".path: expected a string");
    out.kind = type == "image" ? Modality::Image : Modality::Audio;
    out.media = media_from_path(path->get<std::string>(), ctx.media_dir, ctx.media, out.kind, param + ".path");
  } else {
    throw bad_field(param, param + ": unknown content part type '" + type + "' (text, image_url, input_audio, image, audio)");
  }
  return out;
}

void check_text_bytes(size_t bytes, const RequestContext& ctx, const char* param) {
  if (bytes > ctx.max_text_bytes)
    throw ApiError(400, std::string(param) + ": the prompt's text is " + std::to_string(bytes) +
                            " bytes, more than the context length can hold in any tokenization (" +
                            std::to_string(ctx.max_text_bytes) + " bytes)",
                   param, "context_length_exceeded");
}

const json kEmptyText = "";

std::vector<ChatMessage> messages(const json& body, const RequestContext& ctx) {
  const json* v = field(body, "messages");
  if (!v) throw ApiError(400, "messages: required", "messages", "missing_field");
  if (!v->is_array()) throw wrong_type("messages", "an array", *v);
  size_t text_bytes = 0, media = 0;
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw wrong_type(where, "an object", m);
    ChatMessage msg;
    const json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_field("messages", where + ".role: expected a string");
    msg.role = role->get<std::string>();
    if (msg.role == "assistant") {
      if (const json* calls = field(m, "tool_calls")) {
        if (!calls->is_array()) throw wrong_type(where + ".tool_calls", "an array", *calls);
        for (size_t j = 0; j < calls->size(); ++j) {
          const json& c = (*calls)[j];
          const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
          if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
              !c["function"]["name"].is_string() || !c.contains("id") || !c["id"].is_string())
            throw bad_field("messages", at + ": expected {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
          if (const json* a = field(c["function"], "arguments"); a && !a->is_string())
            throw bad_field("messages", at + ".function.arguments: expected a string of JSON");
          else if (a)
            text_bytes += a->get_ref<const std::string&>().size();  // the prompt holds them too
        }
        if (!calls->empty()) msg.tool_calls = *calls;  // [] as some clients send it: no calls
      }
    }
    if (msg.role == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) throw bad_field("messages", where + ".tool_call_id: required (the id of the call it answers)");
      msg.tool_call_id = id->get<std::string>();
    }
    const json* content = field(m, "content");
    if (!content && !msg.tool_calls.is_null()) content = &kEmptyText;  // an assistant turn of calls only
    if (!content) throw bad_field("messages", where + ".content: required");
    if (content->is_string()) {
      msg.parts.push_back({Modality::Text, content->get<std::string>(), {}});
    } else if (content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        const std::string p = where + ".content[" + std::to_string(j) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          throw bad_field("messages", p + ": expected an object with a string 'type'");
        if (part["type"] == "text") {
          const json* text = field(part, "text");
          if (!text || !text->is_string()) throw bad_field("messages", p + ".text: expected a string");
          msg.parts.push_back({Modality::Text, text->get<std::string>(), {}});
        } else {
          if (++media > ctx.max_media)
            throw bad_field("messages", p + ": a request may hold at most " + std::to_string(ctx.max_media) +
                                            " media parts (--max-media)");
          msg.parts.push_back(media_part(part, p, ctx));
        }
      }
    } else {
      throw wrong_type(where + ".content", "a string or an array of content parts", *content);
    }
    for (const MessagePart& part : msg.parts)
      if (part.kind == Modality::Text) text_bytes += part.text.size();
    check_text_bytes(text_bytes, ctx, "messages");
    out.push_back(std::move(msg));
  }
  return out;
}

PromptBatch completion_prompt(const json& body, const RequestContext& ctx) {
  const json* v = field(body, "prompt");
  if (!v) throw ApiError(400, "prompt: required", "prompt", "missing_field");
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  if (v->is_string()) {
    check_text_bytes(v->get_ref<const std::string&>().size(), ctx, "prompt");
    return text_prompt(v->get<std::string>(), ctx.tokenizer, ctx.config);
  }
  if (v->is_array() && !v->empty() && (*v)[0].is_number_integer()) {
    // Token ids, fed as they are (no BOS added).
    PromptBatch p;
    p.batch = 1;
    for (const json& t : *v) {
      if (!t.is_number_integer()) throw wrong_type("prompt", "a list of token ids", t);
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= ctx.config.vocab_size)
        throw bad_field("prompt", "prompt: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                      std::to_string(ctx.config.vocab_size) + ")");
      if (id == ctx.config.image_token_id || id == ctx.config.audio_token_id || id == ctx.config.video_token_id)
        throw bad_field("prompt", "prompt: token id " + std::to_string(id) + " is a media soft token");
      p.tokens.push_back(int(id));
      p.modality.push_back(Modality::Text);
    }
    p.seq = int(p.tokens.size());
    p.attention_mask.assign(p.tokens.size(), 1);
    return p;
  }
  throw bad_field("prompt", "prompt: expected a string, a list of one string, or a list of token ids");
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body_text, bool chat, const RequestContext& ctx) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, std::string("the body must be a JSON object, got ") + type_name(body), "", "invalid_json");
  CompletionRequest r;
  r.chat = chat;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  r.choices = int(integer(body, "n", 1, 128).value_or(1));
  refuse_unsupported(body, chat, r.choices);
  r.sampling = sampling(body, ctx.config.vocab_size, ctx.defaults);
  r.stop = stop_strings(body);
  r.top_logprobs = top_logprobs(body, chat);
  r.json_grammar = response_format(body, body_text);
  if (chat) r.tools = tool_use(body);
  if (r.json_grammar && !r.tools.tools.is_null() && r.tools.choice != "none")
    throw bad_field("response_format", "response_format with tools: a reply is either a JSON document or tool calls; "
                                       "send tool_choice \"none\" to ask for the document");
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  const auto max_tokens = integer(body, "max_tokens", 0, INT32_MAX);
  const auto max_completion = integer(body, "max_completion_tokens", 0, INT32_MAX);
  r.max_tokens = max_completion ? max_completion : max_tokens;
  // splitdec's extension: image_tokens, the Gemma-4 soft-token budget of
  // this request's images (as --image-tokens); checked here so that the
  // error names the field.
  ImageOptions image = ctx.media.image_options();
  if (const auto t = integer(body, "image_tokens", 1, 1 << 20)) {
    const FrontendConfig* f = ctx.media.frontend() ? &ctx.media.frontend()->config() : nullptr;
    if (!f || f->vision == VisionFrontend::None)
      throw bad_field("image_tokens", "image_tokens: this model has no vision frontend");
    if (f->vision == VisionFrontend::Siglip) {
      if (*t != f->siglip.tokens())
        throw bad_field("image_tokens", "image_tokens: Gemma-3 images are always " + std::to_string(f->siglip.tokens()) +
                                            " tokens (got " + std::to_string(*t) + ")");
    } else if (!is_gemma4_image_budget(int(*t))) {
      throw bad_field("image_tokens", "image_tokens: " + std::to_string(*t) +
                                          " is not a Gemma-4 budget (70, 140, 280, 560, 1120 are)");
    }
    image.image_tokens = int(*t);
  }
  // splitdec's extension: pan_and_scan, Gemma-3's do_pan_and_scan for this
  // request's images (as --pan-and-scan).
  if (const auto pan = boolean(body, "pan_and_scan")) {
    const FrontendConfig* f = ctx.media.frontend() ? &ctx.media.frontend()->config() : nullptr;
    if (*pan && (!f || f->vision != VisionFrontend::Siglip))
      throw bad_field("pan_and_scan", "pan_and_scan: a Gemma-3 (SigLIP) image option; this model's images " +
                                          std::string(f && f->vision != VisionFrontend::None ? "are sized by image_tokens instead"
                                                                                           : "have no vision frontend"));
    image.pan_and_scan = *pan;
  }
  const MediaLoader loader = ctx.media.with_image_options(image);
  const RequestContext request_ctx{ctx.tokenizer, ctx.config, ctx.chat_template, ctx.media_dir, loader, ctx.max_text_bytes,
                                   ctx.max_media, ctx.defaults};
  try {
    r.prompt = chat ? chat_prompt(messages(body, request_ctx), ctx.tokenizer, ctx.config, ctx.chat_template, r.tools)
                    : completion_prompt(body, request_ctx);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {  // the tokenizer or the prompt checks refused the input
    throw ApiError(400, e.what(), chat ? "messages" : "prompt");
  }
  // /v1/completions' echo: the reply starts with the prompt's text (token-id prompts decoded).
  if (!chat && boolean(body, "echo").value_or(false)) {
    if (r.top_logprobs >= 0)
      throw bad_field("echo", "echo with logprobs: the prompt's own log probabilities are not computed; ask for one of them");
    const json& prompt = body["prompt"];
    const json& one = prompt.is_array() && prompt.size() == 1 && prompt[0].is_string() ? prompt[0] : prompt;
    r.echo = one.is_string() ? one.get<std::string>() : ctx.tokenizer.decode(r.prompt.tokens);
  }
  return r;
}

}  // namespace splitdec::serve
