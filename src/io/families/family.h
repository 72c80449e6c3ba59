// A model family: the model_type values of config.json it answers to, the
// parser that turns its fields into a ModelConfig, and make-model's presets
// of its checkpoints (presets.h). Family differences end up as data in
// ModelConfig / LayerSpec (norm flavour, head dims, v_norm, layer_scalar, KV
// sharing, per-layer embeddings, experts), which the model, the loader and
// the exporter read without asking which family it is.
//
// Adding a family whose layers are made of pieces splitdec has: a parser
// file (with the family's entry: model_types and their media towers, chat
// template, media markup) and a presets file in this folder, a GGUF mapping
// if llama.cpp writes the family, and one line in registry.cpp.
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

// The media towers a model_type's vision_config / audio_config describe.
// The family names them; media/frontend_config.cpp reads each kind's fields
// and media/ builds it (the towers sit above io/, so the family says which,
// not how).
enum class VisionTower { None, Siglip, Gemma4Encoder, UnifiedPatches };
enum class AudioTower { None, RawFrames, Conformer };
struct MediaTowers {
  VisionTower vision = VisionTower::None;
  AudioTower audio = AudioTower::None;
};

// How the family's chat template marks media, which prompt/chat_prompt.cpp
// expands into media blocks as Hugging Face's processor does.
struct MediaMarkup {
  // Gemma-3 writes begin-of-image (the processor adds the soft tokens and
  // end-of-image); Gemma-4 writes the image soft token.
  enum class Image { BeginOfImage, SoftToken } image = Image::SoftToken;
  bool audio = false;  // the template marks audio with the audio soft token
  // Gemma-3's processor: every image is mm_tokens_per_image rows, its block
  // stands between blank lines, and pan-and-scan crops follow the original.
  bool fixed_image_tokens = false;
  bool image_block_between_blank_lines = false;
  bool pan_and_scan = false;
};

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
    MediaTowers towers;  // what its vision_config / audio_config describe
  };
  Family family;
  std::vector<Type> model_types;
  // Fills every field of `config` but model_type and family.
  void (*parse)(const ConfigSource& source, ModelConfig& config);
  // make-model's presets of this family (presets.h).
  std::vector<ModelPreset> (*presets)();
  // The built-in chat template for a checkpoint without one
  // (prompt/chat_template.cpp) and how templates mark media.
  const char* builtin_chat_template;
  MediaMarkup media_markup;
};

const ModelFamily& gemma3_family();
const ModelFamily& gemma4_family();

// The family of a model_type, or nullptr (registry.cpp).
const ModelFamily* find_model_family(const std::string& model_type, bool* multimodal);
// The family and the media towers of a loaded config (its model_type is
// registered: the loader refuses others).
const ModelFamily& family_of(const ModelConfig& config);
MediaTowers media_towers_of(const ModelConfig& config);
// "gemma3, gemma3_text, ..." in registry order, for the error message.
std::string supported_model_types();
// Every registered family, in registry order.
std::vector<const ModelFamily*> model_families();

}  // namespace splitdec
