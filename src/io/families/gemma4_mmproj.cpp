#include "io/families/gemma4_mmproj.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "io/families/gemma4_gguf.h"
#include "io/families/gguf_keys.h"
#include "io/families/gguf_model.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

namespace {

const std::string kVision = "model.vision_tower.";
const std::string kAudio = "model.audio_tower.";

// How a layer tensor's names relate: a Gemma4ClippableLinear (GGUF X.weight
// <-> HF Y.linear.weight, and its bounds X.input_min <-> Y.input_min ...), a
// module's weight (X.weight <-> Y.weight), or a bare parameter (X.weight <-> Y).
enum class Kind { Linear, Weight, Bare };
struct LayerName {
  const char* gguf;
  const char* hf;
  Kind kind;
};

// llama.cpp's names (gguf-py constants.py / tensor_mapping.py, clip-impl.h)
// beside Gemma4VisionEncoderLayer's (model.vision_tower.encoder.layers.N.*).
const std::vector<LayerName>& vision_layer_names() {
  static const std::vector<LayerName> names = {
      {"attn_q", "self_attn.q_proj", Kind::Linear},
      {"attn_k", "self_attn.k_proj", Kind::Linear},
      {"attn_v", "self_attn.v_proj", Kind::Linear},
      {"attn_out", "self_attn.o_proj", Kind::Linear},
      {"attn_q_norm", "self_attn.q_norm", Kind::Weight},
      {"attn_k_norm", "self_attn.k_norm", Kind::Weight},
      {"ln1", "input_layernorm", Kind::Weight},
      {"attn_post_norm", "post_attention_layernorm", Kind::Weight},
      {"ln2", "pre_feedforward_layernorm", Kind::Weight},
      {"ffn_post_norm", "post_feedforward_layernorm", Kind::Weight},
      {"ffn_gate", "mlp.gate_proj", Kind::Linear},
      {"ffn_up", "mlp.up_proj", Kind::Linear},
      {"ffn_down", "mlp.down_proj", Kind::Linear},
  };
  return names;
}

// ... and beside Gemma4AudioModel's conformer layers (model.audio_tower.layers.N.*).
// lconv1d's two norms are named the other way round in the file
// (tensor_mapping.py; clip.cpp loads them swapped back).
const std::vector<LayerName>& audio_layer_names() {
  static const std::vector<LayerName> names = {
      {"ffn_norm", "feed_forward1.pre_layer_norm", Kind::Weight},
      {"ffn_up", "feed_forward1.ffw_layer_1", Kind::Linear},
      {"ffn_down", "feed_forward1.ffw_layer_2", Kind::Linear},
      {"ffn_post_norm", "feed_forward1.post_layer_norm", Kind::Weight},
      {"ffn_norm_1", "feed_forward2.pre_layer_norm", Kind::Weight},
      {"ffn_up_1", "feed_forward2.ffw_layer_1", Kind::Linear},
      {"ffn_down_1", "feed_forward2.ffw_layer_2", Kind::Linear},
      {"ffn_post_norm_1", "feed_forward2.post_layer_norm", Kind::Weight},
      {"attn_pre_norm", "norm_pre_attn", Kind::Weight},
      {"attn_post_norm", "norm_post_attn", Kind::Weight},
      {"attn_q", "self_attn.q_proj", Kind::Linear},
      {"attn_k", "self_attn.k_proj", Kind::Linear},
      {"attn_v", "self_attn.v_proj", Kind::Linear},
      {"attn_out", "self_attn.post", Kind::Linear},
      {"attn_k_rel", "self_attn.relative_k_proj", Kind::Weight},
      {"per_dim_scale", "self_attn.per_dim_scale", Kind::Bare},
      {"conv_norm", "lconv1d.pre_layer_norm", Kind::Weight},
      {"conv_pw1", "lconv1d.linear_start", Kind::Linear},
      {"conv_dw", "lconv1d.depthwise_conv1d", Kind::Weight},
      {"norm_conv", "lconv1d.conv_norm", Kind::Weight},
      {"conv_pw2", "lconv1d.linear_end", Kind::Linear},
      {"ln2", "norm_out", Kind::Weight},
  };
  return names;
}

const std::vector<std::pair<std::string, std::string>>& global_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"v.patch_embd.weight", kVision + "patch_embedder.input_proj.weight"},
      {"v.position_embd.weight", kVision + "patch_embedder.position_embedding_table"},
      {"v.std_bias", kVision + "std_bias"},
      {"v.std_scale", kVision + "std_scale"},
      {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight"},
      {"a.conv1d.0.weight", kAudio + "subsample_conv_projection.layer0.conv.weight"},
      {"a.conv1d.0.norm.weight", kAudio + "subsample_conv_projection.layer0.norm.weight"},
      {"a.conv1d.1.weight", kAudio + "subsample_conv_projection.layer1.conv.weight"},
      {"a.conv1d.1.norm.weight", kAudio + "subsample_conv_projection.layer1.norm.weight"},
      {"a.input_projection.weight", kAudio + "subsample_conv_projection.input_proj_linear.weight"},
      {"a.pre_encode.out.weight", kAudio + "output_proj.weight"},
      {"a.pre_encode.out.bias", kAudio + "output_proj.bias"},
      {"mm.a.input_projection.weight", "model.embed_audio.embedding_projection.weight"},
  };
  return names;
}

const char* const kBounds[] = {"input_min", "input_max", "output_min", "output_max"};

std::string checkpoint_name(const std::string& gguf) {
  for (const auto& [ours, theirs] : global_names())
    if (gguf == ours) return theirs;
  static const std::regex layer(R"((v|a)\.blk\.(0|[1-9]\d{0,3})\.([a-z_0-9]+)\.([a-z_]+))");
  std::smatch m;
  if (!std::regex_match(gguf, m, layer)) return "";
  const bool vision = m[1] == "v";
  const std::string prefix = vision ? kVision + "encoder.layers." + m[2].str() + "." : kAudio + "layers." + m[2].str() + ".";
  const std::string suffix = m[4];
  for (const LayerName& n : vision ? vision_layer_names() : audio_layer_names()) {
    if (m[3] != n.gguf) continue;
    if (suffix == "weight") {
      switch (n.kind) {
        case Kind::Linear: return prefix + n.hf + ".linear.weight";
        case Kind::Weight: return prefix + n.hf + ".weight";
        case Kind::Bare: return prefix + n.hf;
      }
    }
    if (n.kind == Kind::Linear)
      for (const char* b : kBounds)
        if (suffix == b) return prefix + n.hf + "." + b;
    return "";
  }
  return "";
}

// A tensor's ggml dimensions (ne) or a ConfigError naming it: the sizes the
// keys do not carry are read off the tensors, as clip.cpp does.
std::vector<uint64_t> dims_of(const GgufFile& f, const std::string& tensor, size_t rank) {
  const GgufTensor* t = f.find_tensor(tensor);
  if (!t) throw FormatError(f.name() + ": tensor '" + tensor + "' is missing (its shape gives a size the metadata does not)");
  if (t->ne.size() != rank)
    throw FormatError(f.name() + ": tensor '" + tensor + "' is " + std::to_string(t->ne.size()) + "-D, expected " +
                      std::to_string(rank) + "-D");
  // Sizes read here become config values: past any tower's, they are a lie.
  for (uint64_t d : t->ne)
    if (d < 1 || d > (uint64_t(1) << 20))
      throw FormatError(f.name() + ": tensor '" + tensor + "' has a dimension of " + std::to_string(d) + ", outside [1, 2^20]");
  return t->ne;
}

bool any_tensor(const GgufFile& f, const std::string& prefix, const std::string& suffix) {
  for (const GgufTensor& t : f.tensors())
    if (t.name.starts_with(prefix) && t.name.ends_with(suffix)) return true;
  return false;
}

void check_projection(const GgufKeys& keys, const GgufFile& f, const std::string& key, int64_t text_hidden) {
  const std::optional<int64_t> projection = f.integer(key);
  if (projection && *projection != text_hidden)
    keys.fail(key, "is " + std::to_string(*projection) + ", but the text model's embedding_length is " +
                       std::to_string(text_hidden) + ": the mmproj belongs to another model");
}

// Gemma4VisionConfig from clip.vision.* (conversion/gemma.py + base.py).
json vision_config_of(const GgufFile& f, const GgufKeys& keys, int64_t text_hidden) {
  json v;
  v["model_type"] = "gemma4_vision";
  const int64_t hidden = keys.count("clip.vision.embedding_length", std::nullopt, 1 << 15);
  const int64_t heads = keys.count("clip.vision.attention.head_count", std::nullopt, 1024);
  v["hidden_size"] = hidden;
  v["num_attention_heads"] = heads;
  v["num_key_value_heads"] = keys.count("clip.vision.attention.head_count_kv", heads, 1024);
  if (!f.integer("clip.vision.attention.head_dim") && hidden % heads != 0)
    keys.fail("clip.vision.attention.head_count", "value " + std::to_string(heads) + " does not divide clip.vision.embedding_length " +
                                                      std::to_string(hidden) + " (and no head_dim is given)");
  v["head_dim"] = keys.count("clip.vision.attention.head_dim", hidden / heads, 4096);
  v["intermediate_size"] = keys.count("clip.vision.feed_forward_length", std::nullopt, 1 << 17);
  v["num_hidden_layers"] = keys.count("clip.vision.block_count", std::nullopt, 256);
  v["patch_size"] = keys.count("clip.vision.patch_size", std::nullopt, 256);
  v["pooling_kernel_size"] = keys.count("clip.vision.projector.scale_factor", 3, 64);
  // [E, positions, 2]: one table per image axis.
  const std::vector<uint64_t> table = dims_of(f, "v.position_embd.weight", 3);
  if (int64_t(table[0]) != hidden || table[2] != 2)
    throw FormatError(f.name() + ": tensor 'v.position_embd.weight' is not [embedding_length, positions, 2] (two axis tables)");
  v["position_embedding_size"] = table[1];
  v["rms_norm_eps"] = keys.positive("clip.vision.attention.layer_norm_epsilon", 1e-6);
  v["standardize"] = f.find_tensor("v.std_bias") != nullptr;
  v["use_clipped_linears"] = any_tensor(f, "v.blk.", ".input_min");
  check_projection(keys, f, "clip.vision.projection_dim", text_hidden);
  if (f.boolean("clip.use_silu").value_or(false)) keys.fail("clip.use_silu", "is true; Gemma-4's vision encoder uses GELU (tanh)");
  // HF's patch embedder maps pixels in [0, 1] to 2x - 1 and nothing else;
  // clip.cpp normalizes by the file's mean / std first, then does the same.
  for (const auto& [key, want] : {std::pair<const char*, double>{"clip.vision.image_mean", 0.0}, {"clip.vision.image_std", 1.0}}) {
    const std::vector<double> values = f.numbers(key);
    if (values.empty()) continue;
    if (values.size() != 3) keys.fail(key, "has " + std::to_string(values.size()) + " values, not 3 (RGB)");
    for (double x : values)
      if (!(std::abs(x - want) <= 1e-6))
        keys.fail(key, "is not " + std::to_string(int(want)) + " for each channel, which Gemma-4's processor implies");
  }
  return v;
}

// Gemma4AudioConfig from clip.audio.* and the tensors' shapes.
json audio_config_of(const GgufFile& f, const GgufKeys& keys, int64_t text_hidden) {
  json a;
  a["model_type"] = "gemma4_audio";
  const int64_t hidden = keys.count("clip.audio.embedding_length", std::nullopt, 1 << 15);
  const int64_t layers = keys.count("clip.audio.block_count", std::nullopt, 256);
  a["hidden_size"] = hidden;
  a["num_hidden_layers"] = layers;
  a["num_attention_heads"] = keys.count("clip.audio.attention.head_count", std::nullopt, 1024);
  if (const std::optional<int64_t> mel = f.integer("clip.audio.num_mel_bins"); mel && *mel != 128)
    keys.fail("clip.audio.num_mel_bins", "is " + std::to_string(*mel) + "; Gemma-4's feature extractor has 128");
  // Conv weights [3, 3, in, out]: their out channels are the subsampling's.
  const std::vector<uint64_t> c0 = dims_of(f, "a.conv1d.0.weight", 4), c1 = dims_of(f, "a.conv1d.1.weight", 4);
  a["subsampling_conv_channels"] = {c0[3], c1[3]};
  // Depthwise [kernel, hidden].
  if (layers > 0) a["conv_kernel_size"] = dims_of(f, "a.blk.0.conv_dw.weight", 2)[0];
  // [hidden, output_proj_dims].
  a["output_proj_dims"] = dims_of(f, "a.pre_encode.out.weight", 2)[1];
  a["rms_norm_eps"] = 1e-6;  // clip.cpp's too: earlier conversions wrote a wrong value
  a["use_clipped_linears"] = any_tensor(f, "a.blk.", ".input_min");
  check_projection(keys, f, "clip.audio.projection_dim", text_hidden);
  return a;
}

// The id of `piece` in the text file's vocabulary, -1 when it has none.
int64_t piece_id(const std::vector<std::string_view>& tokens, int64_t vocab, const char* piece) {
  for (size_t id = 0; id < tokens.size() && int64_t(id) < vocab; ++id)
    if (tokens[id] == piece) return int64_t(id);
  return -1;
}

// HF's patch rows [E, (y, x, c)] to a conv kernel's [E, (c, y, x)], or back.
std::vector<float> permute_patches(const std::vector<float>& in, size_t P, bool to_conv) {
  const size_t E = in.size() / (3 * P * P);
  std::vector<float> out(in.size());
  for (size_t e = 0; e < E; ++e)
    for (size_t c = 0; c < 3; ++c)
      for (size_t y = 0; y < P; ++y)
        for (size_t x = 0; x < P; ++x) {
          const size_t row = e * 3 * P * P + (y * P + x) * 3 + c, conv = ((e * 3 + c) * P + y) * P + x;
          if (to_conv) out[conv] = in[row];
          else out[row] = in[conv];
        }
  return out;
}

}  // namespace

json gemma4_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  const GgufKeys keys(mmproj);
  const std::optional<std::string> arch = mmproj.string("general.architecture");
  if (arch != "clip")
    keys.fail("general.architecture", (arch ? "is '" + *arch + "'" : std::string("is missing")) +
                                          "; --mmproj takes a media tower file (architecture clip), as llama.cpp's converter "
                                          "writes it with --mmproj");
  json text_config = gemma4_config_from_gguf(text);
  const int64_t text_hidden = text_config["hidden_size"].get<int64_t>();
  const int64_t vocab = text_config["vocab_size"].get<int64_t>();
  const bool vision = mmproj.boolean("clip.has_vision_encoder").value_or(false);
  const bool audio = mmproj.boolean("clip.has_audio_encoder").value_or(false);
  if (!vision && !audio)
    keys.fail("clip.has_vision_encoder", "and clip.has_audio_encoder are not true: the file holds no tower");
  auto projector = [&](const char* key, const char* want) {
    const std::string type = mmproj.string(key).value_or(mmproj.string("clip.projector_type").value_or(""));
    if (type != want)
      keys.fail(key, "is '" + type + "'; splitdec reads Gemma-4's " + want + " projector for this tower");
  };
  json c;
  c["model_type"] = "gemma4";
  c["architectures"] = {"Gemma4ForConditionalGeneration"};
  if (vision) {
    projector("clip.vision.projector_type", "gemma4v");
    c["vision_config"] = vision_config_of(mmproj, keys, text_hidden);
  }
  if (audio) {
    projector("clip.audio.projector_type", "gemma4a");
    c["audio_config"] = audio_config_of(mmproj, keys, text_hidden);
  }
  // The media markers by their pieces, as llama.cpp's mtmd finds them.
  const std::pair<const char*, const char*> image_pieces[] = {
      {"boi_token_id", "<|image>"}, {"image_token_id", "<|image|>"}, {"eoi_token_id", "<image|>"}, {"video_token_id", "<|video|>"}};
  const std::pair<const char*, const char*> audio_pieces[] = {
      {"boa_token_id", "<|audio>"}, {"audio_token_id", "<|audio|>"}, {"eoa_token_index", "<audio|>"}};
  const std::vector<std::string_view> vocabulary = text.strings("tokenizer.ggml.tokens");
  auto markers = [&](const auto& pieces, bool needed, const char* what) {
    for (const auto& [field, piece] : pieces) {
      const int64_t id = piece_id(vocabulary, vocab, piece);
      if (id >= 0) c[field] = id;
      else if (needed && std::string(field) != "video_token_id")
        throw ConfigError(text.name() + ": the vocabulary (tokenizer.ggml.tokens) has no " + piece + ", which " + what +
                          " needs: is it a Gemma-4 model?");
    }
  };
  markers(image_pieces, vision, "an image block");
  markers(audio_pieces, audio, "an audio block");
  // Image tokens attend to each other, but in the models with per-layer
  // inputs (E2B, E4B), which are causal throughout.
  const bool per_layer_inputs = text_config.value("hidden_size_per_layer_input", int64_t(0)) > 0;
  text_config["use_bidirectional_attention"] = vision && !per_layer_inputs ? json("vision") : json(nullptr);
  c["text_config"] = std::move(text_config);
  return c;
}

ModelConfig gemma4_model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  ModelConfig c = parse_model_config(gemma4_config_from_gguf_pair(text, mmproj), text.name() + " + " + mmproj.name());
  c.embed_scale_rounded = false;  // llama.cpp scales by sqrtf(n_embd) in f32, as for the text file alone
  return c;
}

MmprojTensors gemma4_tensors_from_mmproj(const GgufFile& f) {
  MmprojTensors out;
  for (const GgufTensor& t : f.tensors()) {
    const std::string name = checkpoint_name(t.name);
    if (name.empty())
      throw FormatError(f.name() + ": tensor '" + t.name + "' is not part of Gemma-4's vision or audio tower" +
                        (t.name.find(".out_scale.") != std::string::npos || t.name.find("per_dim_k_scale") != std::string::npos
                             ? " as Hugging Face's Gemma4 model has them"
                             : ""));
    TensorView v = gguf_tensor_view(f, t);
    const std::string where = f.name() + ": tensor '" + t.name + "'";
    auto own = [&](std::vector<float> values, std::vector<int64_t> shape) {
      auto kept = std::make_shared<const std::vector<float>>(std::move(values));
      v.dtype = DType::F32;
      v.blocks = BlockType::None;
      v.shape = std::move(shape);
      v.data = reinterpret_cast<const uint8_t*>(kept->data());
      v.nbytes = kept->size() * sizeof(float);
      out.owned.push_back(std::move(kept));
    };
    switch (gemma4_mmproj_change(name)) {
      case Gemma4MmprojChange::PatchToConv: {
        // [P, P, 3, E] in ggml order: rows e of (c, y, x). HF's rows are (y, x, c).
        if (t.ne.size() != 4 || t.ne[0] != t.ne[1] || t.ne[2] != 3 || v.blocks != BlockType::None || t.ne[0] > 1024 ||
            t.ne[3] < 1 || t.ne[3] > (uint64_t(1) << 20))
          throw FormatError(where + " is not a float [patch, patch, 3, embedding] conv kernel of at most 1024 px patches");
        const int64_t P = int64_t(t.ne[0]), E = int64_t(t.ne[3]);
        own(gemma4_mmproj_from_file(Gemma4MmprojChange::PatchToConv, v.to_f32(), P, where), {E, 3 * P * P});
        break;
      }
      case Gemma4MmprojChange::Softplus:
        if (v.blocks != BlockType::None) throw FormatError(where + " is quantized; a per-dimension scale is stored as floats");
        own(gemma4_mmproj_from_file(Gemma4MmprojChange::Softplus, v.to_f32(), 0, where), v.shape);
        break;
      case Gemma4MmprojChange::None:
        // The depthwise kernel lost HF's singleton channel axis: [K, A] -> [A, 1, K].
        if (name.ends_with("lconv1d.depthwise_conv1d.weight") && v.shape.size() == 2) v.shape = {v.shape[0], 1, v.shape[1]};
        break;
    }
    if (!out.views.emplace(name, v).second)
      throw FormatError(f.name() + ": tensors '" + out.views.at(name).name + "' and '" + t.name + "' are the same tensor of the towers");
  }
  return out;
}

std::string gemma4_mmproj_tensor_name(const std::string& name) {
  for (const auto& [ours, theirs] : global_names())
    if (name == theirs) return ours;
  static const std::regex vision_layer("model\\.vision_tower\\.encoder\\.layers\\.(\\d+)\\.(.+)");
  static const std::regex audio_layer("model\\.audio_tower\\.layers\\.(\\d+)\\.(.+)");
  std::smatch m;
  const bool vision = std::regex_match(name, m, vision_layer);
  if (!vision && !std::regex_match(name, m, audio_layer)) return "";
  const std::string prefix = std::string(vision ? "v" : "a") + ".blk." + m[1].str() + ".", leaf = m[2];
  for (const LayerName& n : vision ? vision_layer_names() : audio_layer_names()) {
    const std::string hf = n.hf;
    switch (n.kind) {
      case Kind::Linear:
        if (leaf == hf + ".linear.weight") return prefix + n.gguf + ".weight";
        for (const char* b : kBounds)
          if (leaf == hf + "." + b) return prefix + n.gguf + "." + b;
        break;
      case Kind::Weight:
        if (leaf == hf + ".weight") return prefix + n.gguf + ".weight";
        break;
      case Kind::Bare:
        if (leaf == hf) return prefix + n.gguf + ".weight";
        break;
    }
  }
  return "";
}

std::vector<float> gemma4_mmproj_to_file(Gemma4MmprojChange change, std::vector<float> values, int64_t patch) {
  switch (change) {
    case Gemma4MmprojChange::None: break;
    case Gemma4MmprojChange::PatchToConv: return permute_patches(values, size_t(patch), true);
    case Gemma4MmprojChange::Softplus:
      for (float& x : values) x = x > 20.f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
      break;
  }
  return values;
}

std::vector<float> gemma4_mmproj_from_file(Gemma4MmprojChange change, std::vector<float> values, int64_t patch,
                                           const std::string& where) {
  switch (change) {
    case Gemma4MmprojChange::None: break;
    case Gemma4MmprojChange::PatchToConv: return permute_patches(values, size_t(patch), false);
    case Gemma4MmprojChange::Softplus:
      for (float& v : values) {
        if (!(v > 0) || !std::isfinite(v))
          throw FormatError(where + ": holds " + std::to_string(v) +
                            ", which no softplus gives (the converter stores softplus(per_dim_scale))");
        // log(e^y - 1), written so large y keep their precision.
        v = v > 20.f ? v + std::log1p(-std::exp(-v)) : std::log(std::expm1(v));
      }
      break;
  }
  return values;
}

Gemma4MmprojChange gemma4_mmproj_change(const std::string& name) {
  if (name == kVision + "patch_embedder.input_proj.weight") return Gemma4MmprojChange::PatchToConv;
  if (name.starts_with(kAudio) && name.ends_with(".self_attn.per_dim_scale")) return Gemma4MmprojChange::Softplus;
  return Gemma4MmprojChange::None;
}

}  // namespace splitdec
