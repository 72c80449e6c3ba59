// make-model's presets, each listed by its family beside the family's config
// parser: the real shapes of the family's checkpoints (random weights) and
// tiny ones that keep every feature. A preset writes a config.json as
// Hugging Face saves it; make-model adds the weights and the tokenizer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace splitdec {

// The ids of the media pieces in the preset's vocabulary.
struct PresetTokenIds {
  int boi = -1, eoi = -1, image = -1, boa = -1, eoa = -1, audio = -1, video = -1;
};

// What a preset fills: config.json's top level and (multimodal types) its
// text_config, the full model's layer count and its layer-type pattern
// (one full layer every `pattern`).
struct PresetDraft {
  nlohmann::ordered_json top, text;
  int layers = 0;
  int pattern = 6;
};

struct ModelPreset {
  const char* name;
  Family family;
  bool tiny;             // f32 by default
  bool real_vocabulary;  // the family's 262144-piece layout, else make-model's small trained vocabulary
  void (*fill)(int vocab, const PresetTokenIds& ids, PresetDraft& draft);
};

std::vector<ModelPreset> gemma3_presets();  // io/families/gemma3_presets.cpp
std::vector<ModelPreset> gemma4_presets();  // io/families/gemma4_presets.cpp

// Every registered family's presets, in registry order; InputError listing
// them for an unknown name.
const ModelPreset& find_model_preset(const std::string& name);
std::string model_preset_names();

// config.json of `preset` for a vocabulary of `vocab` pieces, cut to its
// first `layers` layers when given (InputError outside [1, its layers]).
nlohmann::ordered_json preset_config_json(const ModelPreset& preset, int vocab, const PresetTokenIds& ids,
                                          std::optional<int> layers);

}  // namespace splitdec
