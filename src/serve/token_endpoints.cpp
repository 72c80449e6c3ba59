#include "serve/token_endpoints.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "serve/api_error.h"

namespace splitdec::serve {

using nlohmann::json;

namespace {

json parse_object(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object", "", "invalid_json");
  return j;
}

// Absent and null are "not given", as in the completion requests.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string tokenize_reply(const std::string& body_text, const TokenEndpointContext& ctx) {
  const json body = parse_object(body_text);
  const json* content = field(body, "content");
  if (!content) throw ApiError(400, "content: required", "content", "missing_field");
  if (!content->is_string()) throw bad_field("content", "content: expected a string");
  const std::string& text = content->get_ref<const std::string&>();
  if (text.size() > ctx.max_text_bytes)
    throw bad_field("content", "content: " + std::to_string(text.size()) + " bytes, more than the limit of " +
                                   std::to_string(ctx.max_text_bytes) + " (what the context length can hold)");
  bool add_special = false;
  if (const json* a = field(body, "add_special")) {
    if (!a->is_boolean()) throw bad_field("add_special", "add_special: expected a boolean");
    add_special = a->get<bool>();
  }
  std::vector<int> tokens;
  if (add_special) tokens.push_back(ctx.config.bos_token_id);
  for (int id : ctx.tokenizer.encode(text)) tokens.push_back(id);
  return dump(json{{"tokens", tokens}});
}

std::string detokenize_reply(const std::string& body_text, const TokenEndpointContext& ctx) {
  const json body = parse_object(body_text);
  const json* v = field(body, "tokens");
  if (!v) throw ApiError(400, "tokens: required", "tokens", "missing_field");
  if (!v->is_array()) throw bad_field("tokens", "tokens: expected an array of token ids");
  if (v->size() > ctx.max_text_bytes)
    throw bad_field("tokens", "tokens: " + std::to_string(v->size()) + " ids, more than the limit of " +
                                  std::to_string(ctx.max_text_bytes));
  const int64_t vocab = ctx.config.vocab_size;
  std::vector<int> ids;
  ids.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string where = "tokens[" + std::to_string(i) + "]";
    if (!t.is_number_integer()) throw bad_field("tokens", where + ": expected an integer token id, got " + t.dump());
    // Large unsigned values do not fit int64: compare as unsigned first.
    const bool in_range = t.is_number_unsigned() ? t.get<uint64_t>() < uint64_t(vocab)
                                                 : t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab;
    if (!in_range)
      throw bad_field("tokens", where + ": token id " + t.dump() + " is outside the vocabulary [0, " +
                                    std::to_string(vocab) + ")");
    ids.push_back(t.get<int>());
  }
  return dump(json{{"content", ctx.tokenizer.decode(ids)}});
}

}  // namespace splitdec::serve
