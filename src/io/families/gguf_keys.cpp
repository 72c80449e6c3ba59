#include "io/families/gguf_keys.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf.h"

namespace splitdec {

using nlohmann::json;

void GgufKeys::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(f_.name() + ": metadata '" + key + "' " + what);
}

int64_t GgufKeys::count(const std::string& key, std::optional<int64_t> fallback, int64_t limit) const {
  const std::optional<int64_t> v = f_.integer(key);
  if (!v && !fallback) fail(key, "is missing");
  const int64_t x = v ? *v : *fallback;
  if (x < 1 || x > limit) fail(key, "value " + std::to_string(x) + " is outside [1, " + std::to_string(limit) + "]");
  return x;
}

std::vector<int64_t> GgufKeys::per_layer(const std::string& key, std::optional<int64_t> fallback, int64_t limit,
                                         int64_t layers) const {
  const GgufValue* v = f_.find(key);
  if (!v || v->type != GgufType::Array) return std::vector<int64_t>(size_t(layers), count(key, fallback, limit));
  if (v->count != uint64_t(layers))  // before the entries are copied out
    fail(key, "has " + std::to_string(v->count) + " entries for " + std::to_string(layers) + " layers");
  const std::vector<int64_t> values = f_.integers(key);
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < 1 || values[i] > limit)
      fail(key, "[" + std::to_string(i) + "] value " + std::to_string(values[i]) + " is outside [1, " + std::to_string(limit) + "]");
  return values;
}

double GgufKeys::positive(const std::string& key, double fallback) const {
  const double x = f_.number(key).value_or(fallback);
  if (!(x > 0) || !std::isfinite(x)) fail(key, "must be a positive finite number, got " + std::to_string(x));
  return x;
}

std::vector<bool> GgufKeys::sliding_layers(const std::string& key, int64_t layers, int64_t default_period) const {
  const GgufValue* pattern = f_.find(key);
  if (pattern && pattern->type == GgufType::Array) {
    if (pattern->count != uint64_t(layers))
      fail(key, "has " + std::to_string(pattern->count) + " entries for " + std::to_string(layers) + " layers");
    return f_.booleans(key);
  }
  const int64_t period = pattern ? count(key, default_period, 1024) : default_period;
  std::vector<bool> sliding(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) sliding[size_t(i)] = (i + 1) % period != 0;
  return sliding;
}

int64_t GgufKeys::table_rows(const std::string& name) const {
  const GgufTensor* t = f_.find_tensor(name);
  if (!t) throw FormatError(f_.name() + ": tensor '" + name + "' is missing");
  if (t->ne.size() != 2) throw FormatError(f_.name() + ": tensor '" + name + "' is not 2-D");
  if (t->ne[1] < 1 || t->ne[1] > (1u << 24))
    throw FormatError(f_.name() + ": tensor '" + name + "' has " + std::to_string(t->ne[1]) + " rows, outside [1, 16777216]");
  return int64_t(t->ne[1]);
}

void GgufKeys::softcap(json& c, const std::string& key) const {
  const std::optional<double> cap = f_.number(key);
  if (!cap || *cap == 0) return;
  if (!(*cap > 0) || !(*cap <= 1e30)) fail(key, "must be a positive finite number (or 0: none), got " + std::to_string(*cap));
  c["final_logit_softcapping"] = *cap;
}

void GgufKeys::special_tokens(json& c, int64_t vocab, const std::vector<std::string>& end_of_generation) const {
  auto token_id = [&](const std::string& key, int64_t fallback) {
    const int64_t id = f_.integer(key).value_or(fallback);
    if (id < 0 || id >= vocab) fail(key, "value " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    return id;
  };
  c["bos_token_id"] = token_id("tokenizer.ggml.bos_token_id", 2);
  c["pad_token_id"] = token_id("tokenizer.ggml.padding_token_id", 0);
  json eos = json::array({token_id("tokenizer.ggml.eos_token_id", 1)});
  auto add_eos = [&](int64_t id) {
    if (std::find(eos.begin(), eos.end(), json(id)) == eos.end()) eos.push_back(id);
  };
  if (f_.find("tokenizer.ggml.eot_token_id")) add_eos(token_id("tokenizer.ggml.eot_token_id", 1));
  const std::vector<std::string_view> tokens = f_.strings("tokenizer.ggml.tokens");
  for (size_t id = 0; id < tokens.size() && int64_t(id) < vocab; ++id)
    if (std::find(end_of_generation.begin(), end_of_generation.end(), tokens[id]) != end_of_generation.end()) add_eos(int64_t(id));
  c["eos_token_id"] = eos;
}

}  // namespace splitdec
