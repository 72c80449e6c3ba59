#include "io/config_fields.h"

#include "core/error.h"

namespace splitdec {

using nlohmann::json;

void ConfigFields::fail(const std::string& field, const std::string& why) const {
  throw ConfigError(where_ + ": field '" + field + "' " + why);
}

int ConfigFields::integer(const std::string& k, int def, int min_value) const {
  if (!has(k)) return def;
  const json& v = j_[k];
  if (!v.is_number_integer()) fail(k, "must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < min_value || x > (int64_t(1) << 30))
    fail(k, "value " + std::to_string(x) + " is out of range [" + std::to_string(min_value) + ", 2^30]");
  return int(x);
}

double ConfigFields::number(const std::string& k, double def) const {
  if (!has(k)) return def;
  if (!j_[k].is_number()) fail(k, "must be a number, got " + j_[k].dump());
  return j_[k].get<double>();
}

std::optional<double> ConfigFields::optional_number(const std::string& k) const {
  if (!has(k)) return std::nullopt;
  return number(k, 0);
}

bool ConfigFields::boolean(const std::string& k, bool def) const {
  if (!has(k)) return def;
  if (!j_[k].is_boolean()) fail(k, "must be true or false, got " + j_[k].dump());
  return j_[k].get<bool>();
}

std::string ConfigFields::string(const std::string& k, const std::string& def) const {
  if (!has(k)) return def;
  if (!j_[k].is_string()) fail(k, "must be a string, got " + j_[k].dump());
  return j_[k].get<std::string>();
}

}  // namespace splitdec
