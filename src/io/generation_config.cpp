#include "io/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace splitdec {

GenerationDefaults read_generation_config(const std::string& model) {
  GenerationDefaults d;
  const std::filesystem::path path = std::filesystem::path(model) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec) || !std::filesystem::exists(path, ec)) return d;
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ConfigError(path.string() + ": not a JSON object");
  d.source = path.string();
  auto number = [&](const char* key, double lo, double hi) -> std::optional<float> {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number() || !(it->get<double>() >= lo && it->get<double>() <= hi))
      throw ConfigError(path.string() + ": " + key + " must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        it->dump());
    return float(it->get<double>());
  };
  if (const auto it = j.find("do_sample"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) throw ConfigError(path.string() + ": do_sample must be a boolean, got " + it->dump());
    d.do_sample = it->get<bool>();
  }
  d.temperature = number("temperature", 0, 100);
  d.top_p = number("top_p", 0, 1);
  d.min_p = number("min_p", 0, 1);
  d.repetition_penalty = number("repetition_penalty", 1e-3, 100);
  if (const auto k = number("top_k", 0, 1 << 30)) {
    if (*k != float(int(*k))) throw ConfigError(path.string() + ": top_k must be an integer");
    d.top_k = int(*k);
  }
  if (d.top_p && *d.top_p == 0) throw ConfigError(path.string() + ": top_p must lie in (0, 1]");
  if (d.min_p && *d.min_p == 1) throw ConfigError(path.string() + ": min_p must lie in [0, 1)");
  return d;
}

}  // namespace splitdec
