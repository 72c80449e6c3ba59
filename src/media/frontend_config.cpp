#include "media/frontend_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf.h"
#include "io/families/gguf_model.h"
#include "io/families/mmproj.h"
#include "io/config_fields.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

bool is_gemma4_image_budget(int tokens) {
  for (int b : kGemma4ImageBudgets)
    if (b == tokens) return true;
  return false;
}

namespace {

void require_activation(const ConfigFields& f) {
  const std::string act = f.string("hidden_act", f.string("hidden_activation", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") f.fail("hidden_act", "value '" + act + "' is not supported (gelu_pytorch_tanh is)");
}

// SiglipVisionConfig's defaults; Gemma-3 checkpoints spell out the So400m shape.
void parse_siglip(const ConfigFields& v, const ModelConfig& decoder, FrontendConfig& f) {
  SiglipShape& s = f.siglip;
  s.hidden = v.integer("hidden_size", 768, 1);
  s.intermediate = v.integer("intermediate_size", 3072, 1);
  s.layers = v.integer("num_hidden_layers", 12, 1);
  s.heads = v.integer("num_attention_heads", 12, 1);
  s.image_size = v.integer("image_size", 224, 1);
  s.patch = v.integer("patch_size", 16, 1);
  s.layer_norm_eps = float(v.number("layer_norm_eps", 1e-6));
  s.text_hidden = decoder.hidden_size;
  require_activation(v);
  if (v.integer("num_channels", 3, 1) != 3) v.fail("num_channels", "must be 3 (RGB)");
  if (v.boolean("vision_use_head", false)) v.fail("vision_use_head", "value true (an attention-pool head) is not supported");
  if (s.hidden % s.heads != 0)
    v.fail("num_attention_heads", "value " + std::to_string(s.heads) + " does not divide hidden_size " + std::to_string(s.hidden));
  s.head_dim = s.hidden / s.heads;
  if (s.image_size % s.patch != 0)
    v.fail("patch_size", "value " + std::to_string(s.patch) + " does not divide image_size " + std::to_string(s.image_size));
  if (s.image_size / s.patch > 1024) v.fail("image_size", "gives more than 1024 x 1024 patches");
  if (s.hidden > (1 << 15) || s.intermediate > (1 << 17) || s.layers > 256)
    v.fail("hidden_size", "the tower's sizes are far past any real checkpoint");
  // The projector pools the patch grid down to mm_tokens_per_image tokens.
  const int grid = s.grid();
  const int side = int(std::lround(std::sqrt(double(decoder.mm_tokens_per_image))));
  if (side * side != decoder.mm_tokens_per_image || side < 1 || grid % side != 0)
    throw ConfigError("config.json: mm_tokens_per_image " + std::to_string(decoder.mm_tokens_per_image) +
                      " must be a square whose side divides the " + std::to_string(grid) + " x " +
                      std::to_string(grid) + " patch grid of the vision tower");
  s.pool = grid / side;
  f.vision = VisionFrontend::Siglip;
}

void parse_gemma4_vision(const ConfigFields& v, const ModelConfig& decoder, FrontendConfig& f) {
  Gemma4VisionShape& s = f.gemma4;
  s.hidden = v.integer("hidden_size", 768, 1);
  s.intermediate = v.integer("intermediate_size", 3072, 1);
  s.layers = v.integer("num_hidden_layers", 16, 1);
  s.heads = v.integer("num_attention_heads", 12, 1);
  s.kv_heads = v.integer("num_key_value_heads", 12, 1);
  s.head_dim = v.integer("head_dim", 64, 2);
  s.patch = v.integer("patch_size", 16, 1);
  s.pool = v.integer("pooling_kernel_size", 3, 1);
  s.positions = v.integer("position_embedding_size", 10240, 1);
  s.rms_norm_eps = float(v.number("rms_norm_eps", 1e-6));
  s.standardize = v.boolean("standardize", false);
  s.text_hidden = decoder.hidden_size;
  f.gemma4_clipped_linears = v.boolean("use_clipped_linears", false);
  require_activation(v);
  if (v.boolean("attention_bias", false)) v.fail("attention_bias", "value true is not supported");
  if (s.heads % s.kv_heads != 0)
    v.fail("num_key_value_heads", "value " + std::to_string(s.kv_heads) + " does not divide num_attention_heads " +
                                      std::to_string(s.heads));
  if (s.head_dim % 4 != 0) v.fail("head_dim", "must be a multiple of 4 (2-D RoPE rotates two halves in pairs)");
  if (s.hidden > (1 << 15) || s.intermediate > (1 << 17) || s.layers > 256 || s.positions > (1 << 20))
    v.fail("hidden_size", "the tower's sizes are far past any real checkpoint");
  s.rope_theta = 100.0;
  if (v.has("rope_parameters")) {
    const json& rp = v.raw("rope_parameters");
    if (!rp.is_object()) v.fail("rope_parameters", "must be an object");
    ConfigFields r(rp, "");
    const std::string type = r.string("rope_type", "default");
    if (type != "default") v.fail("rope_parameters.rope_type", "value '" + type + "' is not supported (default is)");
    s.rope_theta = r.number("rope_theta", 100.0);
    if (!(s.rope_theta > 0)) v.fail("rope_parameters.rope_theta", "must be positive");
  }
  f.gemma4_patch = s.patch;
  f.gemma4_pool = s.pool;
  f.vision = VisionFrontend::Gemma4Encoder;
}

void parse_unified_vision(const ConfigFields& v, const ModelConfig& decoder, FrontendConfig& f) {
  UnifiedVisionShape& s = f.unified;
  f.gemma4_patch = v.integer("patch_size", 16, 1);
  f.gemma4_pool = v.integer("pooling_kernel_size", 3, 1);
  s.patch = f.gemma4_patch * f.gemma4_pool;
  s.embed_dim = v.integer("mm_embed_dim", 3840, 1);
  s.positions = v.integer("mm_posemb_size", 1120, 1);
  s.rms_norm_eps = float(v.number("rms_norm_eps", 1e-6));
  s.text_hidden = decoder.hidden_size;
  const int out = v.integer("output_proj_dims", decoder.hidden_size, 1);
  if (out != decoder.hidden_size)
    v.fail("output_proj_dims", "value " + std::to_string(out) + " differs from the decoder's hidden_size " +
                                   std::to_string(decoder.hidden_size));
  if (s.patch > 256 || s.embed_dim > (1 << 15) || s.positions > (1 << 20))
    v.fail("patch_size", "the embedder's sizes are far past any real checkpoint");
  f.vision = VisionFrontend::UnifiedPatches;
}

// Gemma4AudioConfig (configuration_gemma4.py): the class defaults are E2B/E4B's.
void parse_conformer_audio(const ConfigFields& a, const ModelConfig& decoder, FrontendConfig& f) {
  ConformerAudioShape& s = f.conformer;
  s.hidden = a.integer("hidden_size", 1024, 2);
  s.layers = a.integer("num_hidden_layers", 12, 0);
  s.heads = a.integer("num_attention_heads", 8, 1);
  s.conv_kernel = a.integer("conv_kernel_size", 5, 1);
  s.chunk = a.integer("attention_chunk_size", 12, 1);
  s.context_left = a.integer("attention_context_left", 13, 2);
  s.logit_cap = float(a.number("attention_logit_cap", 50.0));
  s.invalid_logit = float(a.number("attention_invalid_logits_value", -1e9));
  s.residual_weight = float(a.number("residual_weight", 0.5));
  s.rms_norm_eps = float(a.number("rms_norm_eps", 1e-6));
  s.gradient_clipping = a.number("gradient_clipping", 1e10);
  s.output_proj_dims = a.integer("output_proj_dims", 1536, 1);
  s.text_hidden = decoder.hidden_size;
  f.conformer_clipped_linears = a.boolean("use_clipped_linears", true);
  const std::string act = a.string("hidden_act", "silu");
  if (act != "silu" && act != "swish") a.fail("hidden_act", "value '" + act + "' is not supported (silu is)");
  if (a.integer("attention_context_right", 0, 0) != 0)
    a.fail("attention_context_right", "values other than 0 are not supported (E2B/E4B use 0)");
  if (a.has("subsampling_conv_channels")) {
    const json& c = a.raw("subsampling_conv_channels");
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_integer() || !c[1].is_number_integer() || c[0].get<int>() < 1 ||
        c[1].get<int>() < 1)
      a.fail("subsampling_conv_channels", "must be two positive integers (the two subsampling convs' channels)");
    s.channels0 = c[0].get<int>(), s.channels1 = c[1].get<int>();
  }
  // HF sizes input_proj_linear as (channels[0] // 4) * channels[1]; the
  // flattened rows hold (128 mel bins / 4) * channels[1] values.
  if (s.channels0 / 4 != s.subsampled_bins())
    a.fail("subsampling_conv_channels", "first value " + std::to_string(s.channels0) + " // 4 must equal the " +
                                            std::to_string(s.subsampled_bins()) + " subsampled mel bins (HF's input_proj_linear width)");
  if (s.hidden % s.heads != 0)
    a.fail("num_attention_heads", "value " + std::to_string(s.heads) + " does not divide hidden_size " + std::to_string(s.hidden));
  if (s.hidden % 2 != 0) a.fail("hidden_size", "must be even (the relative position sinusoids fill two halves)");
  if (!(s.logit_cap > 0)) a.fail("attention_logit_cap", "must be positive");
  if (!(s.gradient_clipping > 0)) a.fail("gradient_clipping", "must be positive");
  if (!(s.rms_norm_eps > 0)) a.fail("rms_norm_eps", "must be positive");
  if (s.hidden > (1 << 15) || s.layers > 256 || s.channels0 > 4096 || s.channels1 > 4096 || s.conv_kernel > 1024 ||
      s.chunk > 4096 || s.context_left > 4096 || s.output_proj_dims > (1 << 16))
    a.fail("hidden_size", "the audio tower's sizes are far past any real checkpoint");
  f.audio = AudioFrontend::Conformer;
}

const json* sub_config(const json& root, const char* key, const std::string& source) {
  if (!root.contains(key) || root[key].is_null()) return nullptr;
  if (!root[key].is_object()) throw ConfigError(source + ": field '" + key + "' must be an object");
  return &root[key];
}

// The processor's feature extractor settings (processor_config.json's
// "feature_extractor", or a preprocessor_config.json of
// Gemma4AudioFeatureExtractor): Google's converter writes the class
// defaults, which audio_log_mel.h implements; another value would change
// the features silently, so it is refused by name. dither (random noise)
// is ignored: 0 by default, and never reproducible anyway.
void check_audio_features(const json& fe, const std::string& source) {
  const ConfigFields f(fe, source + " (feature_extractor)");
  auto same = [&](const char* key, double want) {
    if (!f.has(key)) return;
    const double v = f.number(key, want);
    if (std::abs(v - want) > 1e-9 * std::max(1.0, std::abs(want)))
      f.fail(key, "value " + std::to_string(v) + " is not supported (Gemma-4's " + std::to_string(want) + " is)");
  };
  same("feature_size", 128), same("sampling_rate", 16000), same("frame_length_ms", 20), same("hop_length_ms", 10);
  same("min_frequency", 0), same("max_frequency", 8000), same("preemphasis", 0), same("input_scale_factor", 1);
  same("mel_floor", 1e-3);
  if (f.boolean("fft_overdrive", false)) f.fail("fft_overdrive", "value true is not supported");
  for (const char* key : {"per_bin_mean", "per_bin_stddev"})
    if (f.has(key)) f.fail(key, "per-bin normalisation is not supported (Gemma-4's processor has none)");
}

}  // namespace

FrontendConfig parse_frontend_config(const json& root, const ModelConfig& decoder, const std::string& source) {
  FrontendConfig f;
  f.default_image_tokens = is_gemma4_image_budget(decoder.mm_tokens_per_image) ? decoder.mm_tokens_per_image : 280;
  if (!root.is_object()) return f;
  // The family says which towers its model_type's sub-configs describe.
  const MediaTowers towers = media_towers_of(decoder);
  const json* vision = sub_config(root, "vision_config", source);
  const json* audio = sub_config(root, "audio_config", source);
  if (vision) {
    const ConfigFields v(*vision, source + " (vision_config)");
    switch (towers.vision) {
      case VisionTower::Siglip: parse_siglip(v, decoder, f); break;
      case VisionTower::Gemma4Encoder: parse_gemma4_vision(v, decoder, f); break;
      case VisionTower::UnifiedPatches: parse_unified_vision(v, decoder, f); break;
      case VisionTower::None: break;
    }
  }
  if (audio) {
    const ConfigFields a(*audio, source + " (audio_config)");
    switch (towers.audio) {
      case AudioTower::RawFrames:
        f.audio_shape.frame = a.integer("audio_embed_dim", 640, 1);
        if (f.audio_shape.frame > (1 << 16)) a.fail("audio_embed_dim", "is far past any real checkpoint");
        f.audio_shape.rms_norm_eps = float(a.number("rms_norm_eps", 1e-6));
        f.audio_shape.text_hidden = decoder.hidden_size;
        f.audio = AudioFrontend::RawFrames;
        break;
      case AudioTower::Conformer: {
        const std::string audio_type = a.string("model_type", "gemma4_audio");
        if (audio_type == "gemma4_audio") parse_conformer_audio(a, decoder, f);
        else f.audio_unsupported = "an audio_config of model_type '" + audio_type + "' is not supported (gemma4_audio is)";
        break;
      }
      case AudioTower::None: break;
    }
  }
  return f;
}

FrontendConfig load_frontend_config(const std::string& model_dir, const ModelConfig& decoder, const std::string& mmproj) {
  namespace fs = std::filesystem;
  if (!mmproj.empty()) {
    check_mmproj_pairing(model_dir, mmproj);
    return parse_frontend_config(config_from_gguf_pair(*GgufFile::open(model_dir), *GgufFile::open(mmproj)), decoder, mmproj);
  }
  // A GGUF holds the text model only (its vision tower is a separate mmproj file).
  if (is_gguf_path(model_dir)) {
    FrontendConfig f = parse_frontend_config(config_from_gguf(*GgufFile::open(model_dir)), decoder, model_dir);
    f.vision_missing = model_dir + " holds the text model only: give its vision tower (llama.cpp's mmproj GGUF) as --mmproj FILE.gguf";
    if (decoder.family == Family::Gemma4)
      f.audio_unsupported = model_dir + " holds the text model only: give its audio tower (llama.cpp's mmproj GGUF of E2B / E4B) "
                                        "as --mmproj FILE.gguf";
    return f;
  }
  const fs::path path = fs::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) throw InputError(path.string() + ": cannot open");
  json root = json::parse(in, nullptr, false);
  if (root.is_discarded()) throw ConfigError(path.string() + ": not valid JSON");
  FrontendConfig f = parse_frontend_config(root, decoder, path.string());
  // The processor's own budget, when the folder has its config.
  for (const char* name : {"preprocessor_config.json", "processor_config.json"}) {
    std::ifstream p(fs::path(model_dir) / name);
    if (!p) continue;
    const json pj = json::parse(p, nullptr, false);
    if (pj.is_discarded() || !pj.is_object()) continue;
    if (f.audio == AudioFrontend::Conformer) {
      if (pj.contains("feature_extractor") && pj["feature_extractor"].is_object())
        check_audio_features(pj["feature_extractor"], (fs::path(model_dir) / name).string());
      else if (pj.contains("feature_extractor_type") && pj["feature_extractor_type"] == "Gemma4AudioFeatureExtractor")
        check_audio_features(pj, (fs::path(model_dir) / name).string());
    }
    const json& ip = pj.contains("image_processor") && pj["image_processor"].is_object() ? pj["image_processor"] : pj;
    if (ip.contains("max_soft_tokens") && ip["max_soft_tokens"].is_number_integer()) {
      const int t = ip["max_soft_tokens"].get<int>();
      if (!is_gemma4_image_budget(t))
        throw ConfigError((fs::path(model_dir) / name).string() + ": max_soft_tokens " + std::to_string(t) +
                          " is not one of 70, 140, 280, 560, 1120");
      f.default_image_tokens = t;
      break;
    }
  }
  return f;
}

}  // namespace splitdec
