// A model family: the model_type values of config.json it answers to and
// the parser that turns its fields into a ModelConfig. Family differences
// end up as data in ModelConfig / LayerSpec (norm flavour, head dims, v_norm,
// layer_scalar, KV sharing), which the model, the loader and the exporter
// read without asking which family it is. Adding a family is one file in
// this folder and one line in registry.cpp.
#pragma once

#include <string>
#include <vector>

#include "io/config_fields.h"
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
};

const ModelFamily& gemma3_family();
const ModelFamily& gemma4_family();

// The family of a model_type, or nullptr (registry.cpp).
const ModelFamily* find_model_family(const std::string& model_type, bool* multimodal);
// "gemma3, gemma3_text, ..." in registry order, for the error message.
std::string supported_model_types();

}  // namespace splitdec
