#include "model/make_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/gemma_tokenizer_json.h"
#include "io/safetensors.h"
#include "media/frontend_weights.h"
#include "io/tokenizer.h"
#include "model/preset_vocabulary.h"
#include "model/quantize_model.h"
#include "model/quantized_tensors.h"
#include "model/weights.h"

namespace splitdec {

extern const char* const kTokenizerCorpus;  // data/tokenizer_corpus.txt, embedded at build time

namespace {

using nlohmann::ordered_json;

constexpr int kTokenizerVocab = 512;

struct Preset {
  const char* name;
  bool tiny;
};
constexpr Preset kPresets[] = {
    {"tiny-gemma3", true},      {"tiny-gemma4", true},      {"tiny-gemma4-unified", true}, {"tiny-gemma4-ple", true},
    {"tiny-gemma4-moe", true},  {"gemma3-1b", false},       {"gemma3-12b", false},         {"gemma4-12b", false},
    {"gemma4-12b-attention", false}, {"gemma4-31b", false}, {"gemma4-e2b", false},        {"gemma4-e4b", false},
    {"gemma4-26b-a4b", false}};

// Token ids of the special pieces in the trained tokenizer.
struct SpecialIds {
  int boi, eoi, image, boa, eoa, audio, video;
};

ordered_json layer_types_json(int n, int pattern, bool force_last_full) {
  ordered_json types = ordered_json::array();
  for (int i = 0; i < n; ++i)
    types.push_back((i + 1) % pattern == 0 || (force_last_full && i == n - 1) ? "full_attention" : "sliding_attention");
  return types;
}

ordered_json preset_config(const std::string& name, int vocab, const SpecialIds& s, std::optional<int> layers) {
  ordered_json text, top;
  auto multimodal_gemma3 = [&](int mm_tokens) {
    top["model_type"] = "gemma3";
    top["boi_token_index"] = s.boi;
    top["eoi_token_index"] = s.eoi;
    top["image_token_index"] = s.image;
    top["mm_tokens_per_image"] = mm_tokens;
    text["model_type"] = "gemma3_text";
  };
  auto multimodal_gemma4 = [&](int mm_tokens) {
    top["model_type"] = "gemma4";
    top["boi_token_id"] = s.boi;
    top["eoi_token_id"] = s.eoi;
    top["image_token_id"] = s.image;
    top["video_token_id"] = s.video;
    top["boa_token_id"] = s.boa;
    top["eoa_token_index"] = s.eoa;
    top["audio_token_id"] = s.audio;
    top["mm_tokens_per_image"] = mm_tokens;
    text["model_type"] = "gemma4_text";
    text["use_bidirectional_attention"] = "vision";
    text["hidden_size_per_layer_input"] = 0;
    text["final_logit_softcapping"] = 30.0;
  };
  // The media frontends: small random towers with the real tensor names on
  // the tiny presets, the real shapes on the full-size ones.
  auto siglip = [&](ordered_json v) {
    v["model_type"] = "siglip_vision_model";
    v["vision_use_head"] = false;
    top["vision_config"] = v;
  };
  auto gemma4_vision = [&](ordered_json v) {
    v["model_type"] = "gemma4_vision";
    v["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 100.0}};
    top["vision_config"] = v;
  };
  auto unified = [&](int hidden, int embed_dim) {
    top["model_type"] = "gemma4_unified";
    text["model_type"] = "gemma4_unified_text";
    top["vision_config"] = {{"model_type", "gemma4_unified_vision"}, {"patch_size", 16}, {"pooling_kernel_size", 3},
                            {"mm_embed_dim", embed_dim}, {"mm_posemb_size", 1120}, {"output_proj_dims", hidden}};
    top["audio_config"] = {{"model_type", "gemma4_unified_audio"}, {"audio_embed_dim", 640}};
  };
  // The vision encoders of convert_gemma4_weights.py: on-device (E2B, E4B:
  // clipped linears) and large (26B-A4B, 31B: standardize).
  auto gemma4_vision_on_device = [&] {
    gemma4_vision({{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 16},
                   {"num_attention_heads", 12}, {"num_key_value_heads", 12}, {"head_dim", 64}, {"patch_size", 16},
                   {"pooling_kernel_size", 3}, {"position_embedding_size", 10240}, {"default_output_length", 280},
                   {"rms_norm_eps", 1e-6}, {"use_clipped_linears", true}, {"standardize", false}});
  };
  auto gemma4_vision_large = [&] {
    gemma4_vision({{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_hidden_layers", 27},
                   {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"head_dim", 72}, {"patch_size", 16},
                   {"pooling_kernel_size", 3}, {"position_embedding_size", 10240}, {"default_output_length", 280},
                   {"rms_norm_eps", 1e-6}, {"use_clipped_linears", false}, {"standardize", true}});
  };
  // E2B / E4B attend causally everywhere (use_bidirectional_attention null).
  auto causal_text = [&] { text["use_bidirectional_attention"] = nullptr; };
  int n_layers = 0;
  int pattern = name.rfind("tiny", 0) == 0 ? 3 : 6;  // sliding layers per full one, plus one
  if (name == "tiny-gemma3") {
    multimodal_gemma3(16);
    n_layers = 6;
    text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"head_dim", 16}, {"query_pre_attn_scalar", 16}, {"sliding_window", 8},
                 {"sliding_window_pattern", 3}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                 {"rms_norm_eps", 1e-6}});
    // 112 px in 14 px patches: an 8 x 8 grid, pooled 2 x 2 to the 16 tokens.
    siglip({{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
            {"image_size", 112}, {"patch_size", 14}, {"layer_norm_eps", 1e-6}});
  } else if (name == "tiny-gemma4" || name == "tiny-gemma4-unified") {
    multimodal_gemma4(16);
    n_layers = 6;
    // Layers s s f s s f; the last two reuse K/V of layers 3 (sliding) and 2 (full).
    text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"num_global_key_value_heads", 1}, {"head_dim", 16},
                 {"global_head_dim", 32}, {"attention_k_eq_v", true}, {"num_kv_shared_layers", 2},
                 {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
    if (name == "tiny-gemma4-unified") {
      unified(64, 32);
    } else {
      // Clipped linears (as E2B/E4B) and standardize (as 26B/31B): both paths run.
      gemma4_vision({{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2},
                     {"num_attention_heads", 2}, {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16},
                     {"pooling_kernel_size", 3}, {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6},
                     {"use_clipped_linears", true}, {"standardize", true}});
    }
  } else if (name == "tiny-gemma4-ple") {
    // E2B / E4B in small: per-layer embeddings, KV-shared layers with the
    // double-wide MLP, causal attention, the clipped-linear vision encoder.
    multimodal_gemma4(16);
    causal_text();
    n_layers = 6;
    text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 1}, {"head_dim", 16}, {"global_head_dim", 32}, {"num_kv_shared_layers", 2},
                 {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 16}, {"vocab_size_per_layer_input", vocab},
                 {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
    gemma4_vision({{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                   {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16}, {"pooling_kernel_size", 3},
                   {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6}, {"use_clipped_linears", true}});
  } else if (name == "tiny-gemma4-moe") {
    // 26B-A4B in small: 8 experts, 2 per token, beside the dense MLP.
    multimodal_gemma4(16);
    n_layers = 6;
    text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 64}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"num_global_key_value_heads", 1}, {"head_dim", 16},
                 {"global_head_dim", 32}, {"attention_k_eq_v", true}, {"enable_moe_block", true}, {"num_experts", 8},
                 {"top_k_experts", 2}, {"moe_intermediate_size", 32}, {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
    gemma4_vision({{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                   {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16}, {"pooling_kernel_size", 3},
                   {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6}, {"standardize", true}});
  } else if (name == "gemma4-e2b") {
    // convert_gemma4_weights.py's gemma-4-e2b: 35 layers (4 sliding : 1 full),
    // the last 20 reuse K/V, per-layer embeddings of 256.
    multimodal_gemma4(280);
    causal_text();
    n_layers = 35;
    pattern = 5;
    text.update({{"vocab_size", 262144}, {"hidden_size", 1536}, {"intermediate_size", 6144}, {"num_attention_heads", 8},
                 {"num_key_value_heads", 1}, {"head_dim", 256}, {"global_head_dim", 512}, {"num_kv_shared_layers", 20},
                 {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 256},
                 {"vocab_size_per_layer_input", 262144}, {"sliding_window", 512}, {"rms_norm_eps", 1e-6}});
    gemma4_vision_on_device();
  } else if (name == "gemma4-e4b") {
    multimodal_gemma4(280);
    causal_text();
    n_layers = 42;
    text.update({{"vocab_size", 262144}, {"hidden_size", 2560}, {"intermediate_size", 10240}, {"num_attention_heads", 8},
                 {"num_key_value_heads", 2}, {"head_dim", 256}, {"global_head_dim", 512}, {"num_kv_shared_layers", 18},
                 {"hidden_size_per_layer_input", 256}, {"vocab_size_per_layer_input", 262144}, {"sliding_window", 512},
                 {"rms_norm_eps", 1e-6}});
    gemma4_vision_on_device();
  } else if (name == "gemma4-26b-a4b") {
    // 128 experts of 704, 8 per token, beside a dense MLP of 2112.
    multimodal_gemma4(280);
    n_layers = 30;
    text.update({{"vocab_size", 262144}, {"hidden_size", 2816}, {"intermediate_size", 2112}, {"num_attention_heads", 16},
                 {"num_key_value_heads", 8}, {"num_global_key_value_heads", 2}, {"head_dim", 256},
                 {"global_head_dim", 512}, {"attention_k_eq_v", true}, {"enable_moe_block", true}, {"num_experts", 128},
                 {"top_k_experts", 8}, {"moe_intermediate_size", 704}, {"sliding_window", 1024}, {"rms_norm_eps", 1e-6}});
    gemma4_vision_large();
  } else if (name == "gemma3-1b") {
    top["model_type"] = "gemma3_text";
    n_layers = 26;
    top.update({{"vocab_size", 262144}, {"hidden_size", 1152}, {"intermediate_size", 6912}, {"num_attention_heads", 4},
                {"num_key_value_heads", 1}, {"head_dim", 256}, {"query_pre_attn_scalar", 256}, {"sliding_window", 512},
                {"sliding_window_pattern", 6}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                {"rms_norm_eps", 1e-6}});
  } else if (name == "gemma3-12b") {
    multimodal_gemma3(256);
    n_layers = 48;
    text.update({{"vocab_size", 262208}, {"hidden_size", 3840}, {"intermediate_size", 15360},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 256},
                 {"query_pre_attn_scalar", 256}, {"sliding_window", 1024}, {"sliding_window_pattern", 6},
                 {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                 {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"rms_norm_eps", 1e-6}});
    // SigLIP-So400m as Google's Gemma-3 4B/12B/27B checkpoints configure it.
    siglip({{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_hidden_layers", 27}, {"num_attention_heads", 16},
            {"image_size", 896}, {"patch_size", 14}, {"layer_norm_eps", 1e-6}});
  } else if (name == "gemma4-12b") {
    // The seed's model: gemma4_unified, encoder-free image and audio embedders.
    multimodal_gemma4(280);
    unified(3840, 3840);
    n_layers = 48;
    text.update({{"vocab_size", 262144}, {"hidden_size", 3840}, {"intermediate_size", 15360},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 256},
                 {"global_head_dim", 512}, {"sliding_window", 1024}, {"rms_norm_eps", 1e-6}});
  } else if (name == "gemma4-31b") {
    // Gemma-4-31B as convert_gemma4_weights.py configures it, with the
    // large-model vision encoder (27 layers, head_dim 72, standardize): the
    // full-size encoder variant (use --layers to cut the 62 GB decoder).
    multimodal_gemma4(280);
    n_layers = 60;
    text.update({{"vocab_size", 262144}, {"hidden_size", 5376}, {"intermediate_size", 21504},
                 {"num_attention_heads", 32}, {"num_key_value_heads", 16}, {"num_global_key_value_heads", 4},
                 {"head_dim", 256}, {"global_head_dim", 512}, {"attention_k_eq_v", true}, {"sliding_window", 1024},
                 {"rms_norm_eps", 1e-6}});
    gemma4_vision({{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_hidden_layers", 27},
                   {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"head_dim", 72}, {"patch_size", 16},
                   {"pooling_kernel_size", 3}, {"position_embedding_size", 10240}, {"default_output_length", 280},
                   {"rms_norm_eps", 1e-6}, {"use_clipped_linears", false}, {"standardize", true}});
  } else if (name == "gemma4-12b-attention") {
    // Gemma-4-12B's attention (16 query heads, 8 KV heads, head_dim 256 /
    // 512, window 1024, 5:1 sliding:full) on a small residual stream, MLP and
    // vocabulary: a stack for measuring attention without 12B of weights.
    multimodal_gemma4(280);
    n_layers = 6;
    text.update({{"vocab_size", vocab}, {"hidden_size", 512}, {"intermediate_size", 1024}, {"num_attention_heads", 16},
                 {"num_key_value_heads", 8}, {"head_dim", 256}, {"global_head_dim", 512}, {"sliding_window", 1024},
                 {"rms_norm_eps", 1e-6}});
  } else {
    std::string valid;
    for (const auto& p : kPresets) valid += (valid.empty() ? "" : ", ") + std::string(p.name);
    throw InputError("unknown preset '" + name + "' (valid: " + valid + ")");
  }
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
  const bool g4 = name.find("gemma4") != std::string::npos;
  // The layer-type pattern of the full model, cut to n_layers (5:1 sliding:full,
  // 4:1 on E2B, 2:1 on the tiny presets).
  t["layer_types"] = layer_types_json(n_layers, pattern, g4);
  if (name == "tiny-gemma4" && n_layers < 6) t["num_kv_shared_layers"] = 0;

  if (!text.empty() && &t == &text) top["text_config"] = text;
  top["tie_word_embeddings"] = true;
  top["pad_token_id"] = 0;
  top["eos_token_id"] = 1;
  top["bos_token_id"] = 2;
  top["torch_dtype"] = "float32";
  return top;
}

// splitmix64: a tiny counter-based generator, identical on every platform.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Uniform in [-1, 1), stream keyed by (seed, tensor name, index).
struct Uniform {
  uint64_t key;
  float at(uint64_t i) const { return float(int64_t(splitmix64(key ^ splitmix64(i)) >> 11) * 0x1.0p-52) - 1.f; }
};

void put(uint8_t* bytes, size_t i, float v, DType dt) {
  if (dt == DType::F32) std::memcpy(bytes + 4 * i, &v, 4);
  else {
    const uint16_t h = dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

// One random tensor: element i is value(u.at(i)) for the tensor's own
// uniform stream u (keyed by the seed and the name).
struct RandomTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::function<float(float r)> value;
};

// Random media-frontend tensors with the checkpoint's names and shapes (the
// list the loader walks, so both agree), scaled like the decoder's: linear
// weights ~ 1/sqrt(fan_in), norm gains near 1, clip bounds at +-3 so that
// clipping happens now and then.
std::vector<RandomTensor> frontend_random_tensors(const FrontendConfig& frontend) {
  FrontendWeights scratch;
  std::vector<RandomTensor> out;
  for (const FrontendTensor& spec : frontend_tensors(frontend, scratch)) {
    int64_t fan_in = 1;
    if (spec.kind == FrontendTensor::TransposedMatrix) fan_in = spec.shape[0];
    else
      for (size_t d = 1; d < spec.shape.size(); ++d) fan_in *= spec.shape[d];
    const float linear = std::sqrt(3.f / float(fan_in));
    out.push_back({spec.name, spec.shape, [kind = spec.kind, linear](float r) {
                     switch (kind) {
                       case FrontendTensor::Matrix:
                       case FrontendTensor::TransposedMatrix: return r * linear;
                       case FrontendTensor::Bias: return 0.02f * r;
                       case FrontendTensor::Gain: return 1.f + 0.1f * r;
                       case FrontendTensor::GainMinusOne: return 0.1f * r;
                       case FrontendTensor::Table: return 0.5f * r;
                       case FrontendTensor::ClipLow: return -3.f;
                       case FrontendTensor::ClipHigh: return 3.f;
                     }
                     return 0.f;
                   }});
  }
  return out;
}

// Random weights for every tensor the config needs, in checkpoint names,
// streamed to the file a few MiB at a time: the full-size presets (24 GB
// for gemma4-12b in bf16) are written on a machine with less memory.
void write_random_weights(const ModelConfig& config, const FrontendConfig& frontend, const std::string& path, DType dtype,
                          uint64_t seed, const std::string& weights) {
  const bool text_only = config.model_type == "gemma3_text";
  const std::string prefix = text_only ? "model." : "model.language_model.";
  const float H = float(config.hidden_size);
  std::vector<RandomTensor> tensors;
  for (const WeightSpec& spec : decoder_weight_specs(config)) {
    // Scales keep every activation near unit RMS so that logits are finite
    // and informative: linear weights ~ 1/sqrt(fan_in), embeddings ~
    // 1/sqrt(hidden) (times sqrt(hidden) at lookup), norm gains near 1.
    const bool q_norm = spec.name.find("q_norm") != std::string::npos;
    const int head_dim = spec.shape[0] > 0 ? int(spec.shape[0]) : 1;
    const float linear = spec.kind == WeightSpec::Linear    ? std::sqrt(3.f / float(spec.shape[1]))
                         : spec.kind == WeightSpec::Experts ? std::sqrt(3.f / float(spec.shape[2]))
                                                            : 0.f;
    const float embedding = std::sqrt(3.f / H);
    const float table = config.per_layer_dim > 0 ? std::sqrt(3.f / float(config.per_layer_dim)) : 0.f;
    // Gemma-4 attention has scale 1: a q_norm gain of 2/sqrt(head_dim)
    // keeps scores at a useful spread.
    const float gain = q_norm ? 2.f / std::sqrt(float(head_dim)) : 1.f;
    tensors.push_back({prefix + spec.name, spec.shape,
                       [kind = spec.kind, linear, embedding, table, gain, adds_one = config.norm_adds_one](float r) {
                         switch (kind) {
                           case WeightSpec::Linear: return r * linear;
                           case WeightSpec::Embedding: return r * embedding;
                           case WeightSpec::Norm: return adds_one ? 0.1f * r : gain * (1.f + 0.1f * r);
                           case WeightSpec::Scalar: return 0.75f + 0.25f * r;
                           case WeightSpec::Experts: return r * linear;
                           case WeightSpec::MappedTable: return r * table;  // times sqrt(P) at lookup
                         }
                         return 0.f;
                       }});
  }
  for (RandomTensor& t : frontend_random_tensors(frontend)) tensors.push_back(std::move(t));
  // With --weights, the decoder's matrices go out as splitdec quantize writes
  // them (values, then scales) from the values rounded to `dtype`.
  std::map<std::string, WeightFormat> quantized;
  if (!weights.empty()) {
    const WeightLoading scheme = weight_loading_named(weights);
    if (!scheme.format || scheme.f32_activations) throw InputError("--weights " + weights + ": make-model writes q8 or q4");
    for (const auto& [name, embedding] : decoder_matrix_names(config, prefix)) {
      const WeightFormat f = embedding ? scheme.embedding_format.value_or(*scheme.format) : *scheme.format;
      for (const RandomTensor& t : tensors)
        if (t.name == name && weight_format_fits(f, int(t.shape.back()))) quantized[name] = f;
    }
  }
  std::vector<SafetensorsWriter::Entry> entries;
  for (const RandomTensor& t : tensors) {
    const auto q = quantized.find(t.name);
    if (q == quantized.end()) {
      entries.push_back({t.name, dtype, t.shape});
      continue;
    }
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
    entries.push_back({t.name, quantized_values_dtype(q->second), quantized_values_shape(q->second, rows, t.shape.back())});
    entries.push_back({quantized_scale_name(t.name), DType::F16, {rows, t.shape.back() / 32}});
  }
  SafetensorsWriter out(path, std::move(entries), {{"format", "pt"}});
  constexpr size_t kPiece = size_t(1) << 22;  // elements generated per write
  std::vector<uint8_t> bytes(kPiece * dtype_size(dtype));
  for (const RandomTensor& t : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= size_t(d);
    const Uniform u{splitmix64(seed ^ hash_name(t.name))};
    if (const auto q = quantized.find(t.name); q != quantized.end()) {
      const int in = int(t.shape.back()), rows = int(n / size_t(in)), step = convert_piece_rows(in);
      std::vector<uint16_t> scales(size_t(rows) * size_t(in / 32));
      std::vector<float> f32;
      std::vector<uint8_t> values;
      for (int r0 = 0; r0 < rows; r0 += step) {
        const int m = std::min(step, rows - r0);
        f32.resize(size_t(m) * size_t(in));
        const size_t base = size_t(r0) * size_t(in);
        ThreadPool::global()->parallel_for(int64_t(f32.size()), [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) f32[size_t(i)] = round_to_dtype(t.value(u.at(base + size_t(i))), dtype);
        }, 1 << 14);
        WeightMatrix block = WeightMatrix::zeros(q->second, m, in);
        ThreadPool::global()->parallel_for(m, [&](int64_t a, int64_t b) {
          block.set_rows_f32(int(a), int(b - a), f32.data() + size_t(a) * size_t(in));
        });
        values.resize(size_t(m) * (weight_row_bytes(q->second, in) - size_t(in / 32) * 2));
        split_quantized_rows(block, 0, m, values.data(), scales.data() + size_t(r0) * size_t(in / 32));
        out.write(values.data(), values.size());
      }
      out.write(scales.data(), scales.size() * 2);
      continue;
    }
    for (size_t i0 = 0; i0 < n; i0 += kPiece) {
      const size_t m = std::min(kPiece, n - i0);
      ThreadPool::global()->parallel_for(
          int64_t(m), [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i) put(bytes.data(), size_t(i), t.value(u.at(i0 + size_t(i))), dtype);
          },
          1 << 14);
      out.write(bytes.data(), m * dtype_size(dtype));
    }
  }
  out.finish();
}

}  // namespace

void make_model(const MakeModelOptions& o) {
  bool tiny = false, known = false;
  for (const auto& p : kPresets)
    if (o.preset == p.name) tiny = p.tiny, known = true;
  if (!known) preset_config(o.preset, 0, {}, std::nullopt);  // throws the listing error
  const DType dtype = o.dtype.value_or(tiny ? DType::F32 : DType::BF16);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw InputError("--out " + o.out_dir + ": cannot create directory: " + ec.message());

  // The tokenizer: a small trained SentencePiece BPE model, written as
  // tokenizer.json (and, for Gemma-3, also as tokenizer.model, as Google's
  // Gemma-3 folders ship both; Gemma-4 folders have only tokenizer.json).
  // Full-size presets get the families' real 262144-piece layout instead.
  const bool gemma4 = o.preset.find("gemma4") != std::string::npos;
  const std::vector<std::string>& special = gemma4 ? gemma4_special_pieces() : gemma_special_pieces();
  const std::string tokenizer_model = train_tokenizer(kTokenizerCorpus, kTokenizerVocab, unsigned(o.seed), special);
  const BpeVocabulary trained = bpe_vocabulary_from_sentencepiece(tokenizer_model, special);
  const bool real_vocabulary = o.preset == "gemma3-1b" || o.preset == "gemma3-12b" || o.preset == "gemma4-12b" ||
                               o.preset == "gemma4-31b" || o.preset == "gemma4-e2b" || o.preset == "gemma4-e4b" ||
                               o.preset == "gemma4-26b-a4b";
  SpecialIds ids{};
  BpeVocabulary vocabulary;
  if (real_vocabulary) {
    vocabulary = preset_vocabulary(gemma4 ? PresetFamily::Gemma4 : PresetFamily::Gemma3, trained);
    const FamilySpecialIds s = family_special_ids(gemma4 ? PresetFamily::Gemma4 : PresetFamily::Gemma3);
    ids = {s.boi, s.eoi, s.image, s.boa, s.eoa, s.audio, s.video};
  } else {
    vocabulary = trained;
    auto tok = Tokenizer::from_serialized(tokenizer_model, "trained tokenizer");
    auto id = [&](const char* piece) { return tok->piece_id(piece); };
    if (gemma4)
      ids = {id("<|image>"), id("<image|>"), id("<|image|>"), id("<|audio>"), id("<audio|>"), id("<|audio|>"), id("<|video|>")};
    else
      ids = {id("<start_of_image>"), id("<end_of_image>"), id("<image_soft_token>"), id("<start_of_audio>"),
             id("<end_of_audio>"), id("<audio_soft_token>"), id("<video_soft_token>")};
  }

  ordered_json cfg_json = preset_config(o.preset, vocabulary.size(), ids, o.layers);
  cfg_json["torch_dtype"] = dtype == DType::F32 ? "float32" : dtype == DType::BF16 ? "bfloat16" : "float16";
  const ModelConfig config = parse_model_config(nlohmann::json::parse(cfg_json.dump()), o.preset);

  const FrontendConfig frontend = parse_frontend_config(nlohmann::json::parse(cfg_json.dump()), config, o.preset);
  write_random_weights(config, frontend, (fs::path(o.out_dir) / "model.safetensors").string(), dtype, o.seed, o.weights);
  if (!o.weights.empty()) cfg_json["splitdec_quantization"] = quantization_note(o.weights, {});
  {
    std::ofstream out(fs::path(o.out_dir) / "config.json");
    out << cfg_json.dump(2) << "\n";
  }
  {
    std::ofstream out(fs::path(o.out_dir) / "tokenizer.json", std::ios::binary);
    out << gemma_tokenizer_json(vocabulary);
  }
  if (!real_vocabulary && !gemma4) {
    std::ofstream out(fs::path(o.out_dir) / "tokenizer.model", std::ios::binary);
    out << tokenizer_model;
  }
  {
    ordered_json tc = {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"},
                       {"pad_token", "<pad>"},  {"unk_token", "<unk>"},   {"tokenizer_class", "GemmaTokenizer"}};
    if (!o.chat_template.empty() && !gemma4) tc["chat_template"] = o.chat_template;
    std::ofstream out(fs::path(o.out_dir) / "tokenizer_config.json");
    out << tc.dump(2) << "\n";
  }
  if (!o.chat_template.empty() && gemma4) {
    std::ofstream out(fs::path(o.out_dir) / "chat_template.jinja", std::ios::binary);
    out << o.chat_template;
  }
  // A stand-in for one image's post-projector embeddings, for demos and tests.
  const int mm = config.mm_tokens_per_image;
  std::vector<float> image(size_t(mm) * size_t(config.hidden_size));
  const Uniform u{splitmix64(o.seed ^ hash_name("demo_image"))};
  for (size_t i = 0; i < image.size(); ++i) image[i] = std::sqrt(3.f) * u.at(i);
  write_npy((fs::path(o.out_dir) / "demo_image.npy").string(), {mm, config.hidden_size}, image.data());
}

}  // namespace splitdec
