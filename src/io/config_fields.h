// Typed reads of one JSON object of a config.json, with the Hugging Face
// class default for an absent (or null) key and a ConfigError that names
// the file and the field for a bad one.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace splitdec {

class ConfigFields {
 public:
  // `where` names the object in messages ("config.json (text_config)").
  ConfigFields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const;
  bool has(const std::string& k) const { return j_.contains(k) && !j_[k].is_null(); }
  const nlohmann::json& raw(const std::string& k) const { return j_[k]; }

  // An integer in [min_value, 2^30].
  int integer(const std::string& k, int def, int min_value = 0) const;
  double number(const std::string& k, double def) const;
  std::optional<double> optional_number(const std::string& k) const;
  bool boolean(const std::string& k, bool def) const;
  std::string string(const std::string& k, const std::string& def) const;

 private:
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace splitdec
