// Every supported model family, keyed on config.json's model_type. Adding a
// family: its files in this folder (parser, presets) and one line here.
#include "io/families/family.h"

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
