// Which media frontends a checkpoint has, and their shapes, read from the
// top level of config.json (vision_config, audio_config) by model_type:
//   gemma3          + vision_config: SigLIP tower + projector (siglip_tower.h)
//   gemma4          + vision_config: the Gemma-4 vision encoder (gemma4_vision_tower.h)
//                   + audio_config (gemma4_audio, E2B/E4B): the conformer audio
//                     tower and embed_audio (conformer_audio_tower.h)
//   gemma4_unified  + vision_config / audio_config: the encoder-free patch and
//                     audio embedders (unified_embedder.h)
// Absent fields take the Hugging Face class defaults; unsupported values are
// ConfigErrors naming the field.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "io/families/family.h"
#include "media/conformer_audio_tower.h"
#include "media/gemma4_vision_tower.h"
#include "media/siglip_tower.h"
#include "media/unified_embedder.h"

namespace splitdec {

struct ModelConfig;

// The kinds a family names (io/families/family.h).
using VisionFrontend = VisionTower;
using AudioFrontend = AudioTower;

// Gemma-4's audio processor: clips are at most 30 s (the feature extractor's
// max_length, 480000 samples at 16 kHz), i.e. 750 soft tokens.
constexpr int64_t kGemma4MaxAudioSamples = 480000;

// Gemma-4 soft-token budgets per image (image_processing_gemma4.py).
constexpr int kGemma4ImageBudgets[] = {70, 140, 280, 560, 1120};
bool is_gemma4_image_budget(int tokens);

struct FrontendConfig {
  VisionFrontend vision = VisionFrontend::None;
  SiglipShape siglip;
  Gemma4VisionShape gemma4;
  bool gemma4_clipped_linears = false;  // checkpoint holds input/output bounds per linear
  UnifiedVisionShape unified;
  // Gemma-4 families: the processor's patch and pooling (16 px, 3), which
  // size the image; and the soft-token budget when a request names none.
  int gemma4_patch = 16, gemma4_pool = 3;
  int default_image_tokens = 280;

  AudioFrontend audio = AudioFrontend::None;
  UnifiedAudioShape audio_shape;
  ConformerAudioShape conformer;
  bool conformer_clipped_linears = true;  // checkpoint holds input/output bounds per clippable linear
  // Why a checkpoint's audio_config cannot be used (empty when it can or has none).
  std::string audio_unsupported;
  // Why there is no vision frontend, where the config alone does not say
  // (a text GGUF without its mmproj); empty otherwise.
  std::string vision_missing;
};

// `root`: the whole config.json; `decoder`: its parsed decoder config (text
// hidden size, model_type, image budget default). `source` names the file.
FrontendConfig parse_frontend_config(const nlohmann::json& root, const ModelConfig& decoder, const std::string& source);
// config.json of `model_dir`, and the processor's max_soft_tokens from
// preprocessor_config.json / processor_config.json when one is there. With
// `mmproj`, the vision config of that mmproj GGUF beside the GGUF `model_dir`.
FrontendConfig load_frontend_config(const std::string& model_dir, const ModelConfig& decoder, const std::string& mmproj = "");

}  // namespace splitdec
