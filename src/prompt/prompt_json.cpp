#include "prompt/prompt_json.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/npy.h"
#include "io/model_config.h"
#include "io/media_embeddings.h"

namespace splitdec {

using nlohmann::json;

namespace {

// Reads a [batch][seq] array of `key`; `convert` maps one JSON value.
template <typename T, typename F>
std::vector<T> read_matrix(const json& j, const std::string& key, int batch, int seq, F convert) {
  const json& m = j[key];
  if (!m.is_array() || int(m.size()) != batch)
    throw InputError("input: '" + key + "' must be a list of " + std::to_string(batch) + " sequences");
  std::vector<T> out;
  for (int b = 0; b < batch; ++b) {
    if (!m[size_t(b)].is_array() || int(m[size_t(b)].size()) != seq)
      throw InputError("input: '" + key + "'[" + std::to_string(b) + "] has " +
                       std::to_string(m[size_t(b)].is_array() ? m[size_t(b)].size() : 0) + " entries, but tokens[" +
                       std::to_string(b) + "] has " + std::to_string(seq));
    for (const json& v : m[size_t(b)]) out.push_back(convert(v));
  }
  return out;
}

}  // namespace

namespace {

json parse_json_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw InputError(path + ": is a directory, not an input JSON file");
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open input file");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(path + ": malformed JSON: " + e.what());
  }
}

PromptBatch prompt_from_json(const json& j, const std::filesystem::path& base_dir, const ModelConfig& c) {
  if (!j.is_object() || !j.contains("tokens")) throw InputError("input: missing key 'tokens'");
  const json& toks = j["tokens"];
  if (!toks.is_array() || toks.empty() || !toks[0].is_array() || toks[0].empty())
    throw InputError("input: 'tokens' must be a non-empty list of non-empty lists of ids");
  PromptBatch p;
  p.batch = int(toks.size());
  p.seq = int(toks[0].size());
  p.tokens = read_matrix<int>(j, "tokens", p.batch, p.seq, [](const json& v) {
    if (!v.is_number_integer()) throw InputError("input: token ids must be integers, got " + v.dump());
    const int64_t x = v.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX) throw InputError("input: token id " + v.dump() + " is out of range");
    return int(x);
  });
  // Without 'modality' every position is text, as a plain list of ids means.
  if (j.contains("modality")) {
    p.modality = read_matrix<Modality>(j, "modality", p.batch, p.seq, [](const json& v) {
      if (!v.is_string()) throw InputError("input: modality entries must be strings, got " + v.dump());
      return parse_modality(v.get<std::string>());
    });
  } else {
    p.modality.assign(size_t(p.batch) * size_t(p.seq), Modality::Text);
  }
  if (j.contains("attention_mask")) {
    p.attention_mask = read_matrix<uint8_t>(j, "attention_mask", p.batch, p.seq, [](const json& v) {
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1))
        throw InputError("input: attention_mask entries must be 0 or 1, got " + v.dump());
      return uint8_t(v.get<int>());
    });
  } else {
    p.attention_mask.assign(size_t(p.rows()), 1);
  }
  if (j.contains("block_ids")) {
    p.block_ids = read_matrix<int>(j, "block_ids", p.batch, p.seq, [](const json& v) {
      if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > INT32_MAX)
        throw InputError("input: block ids must be integers >= -1, got " + v.dump());
      return int(v.get<int64_t>());
    });
  }
  if (j.contains("media_embeddings")) {
    if (!j["media_embeddings"].is_string()) throw InputError("input: 'media_embeddings' must be a .npy path");
    std::filesystem::path mp = j["media_embeddings"].get<std::string>();
    if (mp.is_relative()) mp = base_dir / mp;
    try {
      p.media = load_media_embeddings(mp.string(), c).data;
    } catch (const FormatError& e) {
      throw InputError(e.what());
    }
  }
  validate_prompt_batch(p, c);
  return p;
}

}  // namespace

PromptBatch read_prompt_json(const std::string& path, const ModelConfig& c) {
  const json j = parse_json_file(path);
  try {
    return prompt_from_json(j, std::filesystem::path(path).parent_path(), c);
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

std::vector<Turn> read_turns_json(const std::string& path, const ModelConfig& c, int default_max_new_tokens) {
  const json j = parse_json_file(path);
  const auto base = std::filesystem::path(path).parent_path();
  std::vector<Turn> turns;
  try {
    if (!j.is_object() || !j.contains("turns")) {
      turns.push_back({prompt_from_json(j, base, c), default_max_new_tokens});
      return turns;
    }
    if (!j["turns"].is_array() || j["turns"].empty()) throw InputError("input: 'turns' must be a non-empty list");
    for (size_t t = 0; t < j["turns"].size(); ++t) {
      const json& tj = j["turns"][t];
      try {
        Turn turn{prompt_from_json(tj, base, c), default_max_new_tokens};
        if (tj.contains("max_new_tokens")) {
          const json& m = tj["max_new_tokens"];
          if (!m.is_number_integer() || m.get<int64_t>() < 0 || m.get<int64_t>() > INT32_MAX)
            throw InputError("input: 'max_new_tokens' must be an integer in [0, " + std::to_string(INT32_MAX) + "], got " + m.dump());
          turn.max_new_tokens = tj["max_new_tokens"].get<int>();
        }
        if (!turns.empty() && turn.prompt.batch != turns[0].prompt.batch)
          throw InputError("input: has " + std::to_string(turn.prompt.batch) + " sequences, turn 0 has " +
                           std::to_string(turns[0].prompt.batch));
        turns.push_back(std::move(turn));
      } catch (const InputError& e) {
        throw InputError("turn " + std::to_string(t) + ": " + e.what());
      }
    }
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  return turns;
}

}  // namespace splitdec
