// A model family: the model_type values of config.json it answers to, the
// parser that turns its fields into a ModelConfig, and make-model's presets
// of its checkpoints (presets.h). Family differences end up as data in
// ModelConfig / LayerSpec (norm flavour, head dims, v_norm, layer_scalar, KV
// sharing, per-layer embeddings, experts), which the model, the loader and
// the exporter read without asking which family it is.
//
// Adding a family whose layers are made of pieces splitdec has: a parser
// file and a presets file in this folder and one line in registry.cpp.
// A new layer piece is a file in model/ (as per_layer_embeddings.h,
// mixture_of_experts.h) with a LayerSpec field and its tensors in
// decoder_weight_specs; a new media tower is a file in media/ with its
// entry in frontend_config.h (see docs/architecture.md).
#pragma once

#include <string>
#include <vector>

#include "io/config_fields.h"
#include "io/families/presets.h"
#include "io/model_config.h"

namespace splitdec {

// What a family parser reads.
struct ConfigSource {
  const ConfigFields& top;   // config.json's top level (multimodal token ids)
  const ConfigFields& text;  // the decoder's fields: text_config for multimodal types, else the top level
  const std::string& model_type;
  bool multimodal;  // a vision-language model_type (its text fields nest in text_config)
};

struct ModelFamily {
  struct Type {
    const char* model_type;
    bool multimodal;
  };
  Family family;
  std::vector<Type> model_types;
  // Fills every field of `config` but model_type and family.
  void (*parse)(const ConfigSource& source, ModelConfig& config);
  // make-model's presets of this family (presets.h).
  std::vector<ModelPreset> (*presets)();
};

const ModelFamily& gemma3_family();
const ModelFamily& gemma4_family();

// The family of a model_type, or nullptr (registry.cpp).
const ModelFamily* find_model_family(const std::string& model_type, bool* multimodal);
// "gemma3, gemma3_text, ..." in registry order, for the error message.
std::string supported_model_types();
// Every registered family, in registry order.
std::vector<const ModelFamily*> model_families();

}  // namespace splitdec
