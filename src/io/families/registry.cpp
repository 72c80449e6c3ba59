// Every supported model family, keyed on config.json's model_type. Adding a
// family: its files in this folder (parser, presets) and one line here.
#include "io/families/family.h"

#include <stdexcept>

namespace splitdec {

namespace {
const ModelFamily& (*const kFamilies[])() = {
    gemma3_family,
    gemma4_family,
};
}  // namespace

const ModelFamily* find_model_family(const std::string& model_type, bool* multimodal) {
  for (auto family : kFamilies)
    for (const ModelFamily::Type& t : family().model_types)
      if (model_type == t.model_type) {
        *multimodal = t.multimodal;
        return &family();
      }
  return nullptr;
}

namespace {
const ModelFamily::Type& registered_type(const ModelConfig& config, const ModelFamily** family) {
  for (auto f : kFamilies)
    for (const ModelFamily::Type& t : f().model_types)
      if (config.model_type == t.model_type) return *family = &f(), t;
  throw std::logic_error("model_type '" + config.model_type + "' is not registered");
}
}  // namespace

const ModelFamily& family_of(const ModelConfig& config) {
  const ModelFamily* family = nullptr;
  registered_type(config, &family);
  return *family;
}

MediaTowers media_towers_of(const ModelConfig& config) {
  const ModelFamily* family = nullptr;
  return registered_type(config, &family).towers;
}

std::vector<const ModelFamily*> model_families() {
  std::vector<const ModelFamily*> out;
  for (auto family : kFamilies) out.push_back(&family());
  return out;
}

std::string supported_model_types() {
  std::string list;
  for (auto family : kFamilies)
    for (const ModelFamily::Type& t : family().model_types) list += (list.empty() ? "" : ", ") + std::string(t.model_type);
  return list;
}

}  // namespace splitdec
