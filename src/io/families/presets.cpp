#include "io/families/presets.h"

#include <algorithm>

#include "core/error.h"
#include "io/families/family.h"

namespace splitdec {

using nlohmann::ordered_json;

namespace {

const std::vector<ModelPreset>& all_presets() {
  static const std::vector<ModelPreset> all = [] {
    std::vector<ModelPreset> v;
    for (const ModelFamily* f : model_families())
      for (const ModelPreset& p : f->presets()) v.push_back(p);
    return v;
  }();
  return all;
}

ordered_json layer_types_json(int n, int pattern, bool force_last_full) {
  ordered_json types = ordered_json::array();
  for (int i = 0; i < n; ++i)
    types.push_back((i + 1) % pattern == 0 || (force_last_full && i == n - 1) ? "full_attention" : "sliding_attention");
  return types;
}

}  // namespace

const ModelPreset& find_model_preset(const std::string& name) {
  for (const ModelPreset& p : all_presets())
    if (name == p.name) return p;
  throw InputError("unknown preset '" + name + "' (valid: " + model_preset_names() + ")");
}

std::string model_preset_names() {
  std::string valid;
  for (const ModelPreset& p : all_presets()) valid += (valid.empty() ? "" : ", ") + std::string(p.name);
  return valid;
}

ordered_json preset_config_json(const ModelPreset& preset, int vocab, const PresetTokenIds& ids, std::optional<int> layers) {
  const std::string name = preset.name;
  PresetDraft d;
  preset.fill(vocab, ids, d);
  ordered_json &top = d.top, &text = d.text;
  int n_layers = d.layers;
  if (layers) {
    if (*layers < 1 || *layers > n_layers)
      throw InputError("--layers " + std::to_string(*layers) + " is outside [1, " + std::to_string(n_layers) +
                       "] for preset " + name);
    // The first N layers of a model whose last K share K/V: only those of
    // the K that are among the N share.
    if (name != "tiny-gemma4" && text.contains("num_kv_shared_layers"))
      text["num_kv_shared_layers"] = std::max(0, text["num_kv_shared_layers"].get<int>() - (n_layers - *layers));
    n_layers = *layers;
  }
  ordered_json& t = top["model_type"] == "gemma3_text" ? top : text;
  t["num_hidden_layers"] = n_layers;
  // The layer-type pattern of the full model, cut to n_layers; Gemma-4's
  // last layer is always full.
  t["layer_types"] = layer_types_json(n_layers, d.pattern, preset.family == Family::Gemma4);
  if (name == "tiny-gemma4" && n_layers < 6) t["num_kv_shared_layers"] = 0;

  if (!text.empty() && &t == &text) top["text_config"] = text;
  top["tie_word_embeddings"] = true;
  top["pad_token_id"] = 0;
  top["eos_token_id"] = 1;
  top["bos_token_id"] = 2;
  top["torch_dtype"] = "float32";
  return top;
}

}  // namespace splitdec
