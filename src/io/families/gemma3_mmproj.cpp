#include "io/families/gemma3_mmproj.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "io/families/gemma3_gguf.h"
#include "io/families/gguf_model.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

namespace {

// Far past Gemma-3's 896 px and 64 x 64 patches, and small enough that a
// hostile file cannot ask for an image or an attention that never ends.
constexpr int64_t kMaxMmprojImageSize = 4096;
constexpr int64_t kMaxMmprojGrid = 128;

const std::string kTower = "model.vision_tower.vision_model.";
const std::string kProjector = "model.multi_modal_projector.";

// llama.cpp's names of a SigLIP layer's tensors beside the checkpoint's
// (gguf-py/gguf/constants.py and tensor_mapping.py, arch MMPROJ).
const std::vector<std::pair<const char*, const char*>>& layer_names() {
  static const std::vector<std::pair<const char*, const char*>> names = {
      {"ln1", "layer_norm1"},         {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"}, {"attn_out", "self_attn.out_proj"}, {"ln2", "layer_norm2"},
      {"ffn_up", "mlp.fc1"},          {"ffn_down", "mlp.fc2"},
  };
  return names;
}

// The tensors outside the layers, by both names.
const std::vector<std::pair<std::string, std::string>>& global_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"v.patch_embd.weight", kTower + "embeddings.patch_embedding.weight"},
      {"v.patch_embd.bias", kTower + "embeddings.patch_embedding.bias"},
      {"v.position_embd.weight", kTower + "embeddings.position_embedding.weight"},
      {"v.post_ln.weight", kTower + "post_layernorm.weight"},
      {"v.post_ln.bias", kTower + "post_layernorm.bias"},
      // The converter renames mm_input_projection_weight to .weight.
      {"mm.input_projection.weight", kProjector + "mm_input_projection_weight"},
      {"mm.soft_emb_norm.weight", kProjector + "mm_soft_emb_norm.weight"},
  };
  return names;
}

std::string checkpoint_name(const std::string& gguf) {
  for (const auto& [ours, theirs] : global_names())
    if (gguf == ours) return theirs;
  static const std::regex layer(R"(v\.blk\.(\d{1,4})\.([a-z_0-9]+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(gguf, m, layer)) return "";
  for (const auto& [ours, theirs] : layer_names())
    if (m[2] == ours) return kTower + "encoder.layers." + m[1].str() + "." + theirs + "." + m[3].str();
  return "";
}

// SiglipVisionConfig fields from the clip.vision.* keys, checked as
// media/frontend_config.cpp then checks the config it parses.
json vision_config_of(const GgufFile& f, int64_t text_hidden, int* tokens_per_image) {
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ConfigError(f.name() + ": metadata '" + key + "' " + what);
  };
  const std::optional<std::string> arch = f.string("general.architecture");
  if (!arch) fail("general.architecture", "is missing");
  if (*arch != "clip")
    fail("general.architecture", "is '" + *arch + "'; --mmproj takes a vision tower file (architecture clip), as " +
                                     "llama.cpp's converter writes it with --mmproj");
  std::string projector = f.string("clip.projector_type").value_or("");
  if (projector.empty()) projector = f.string("clip.vision.projector_type").value_or("");
  if (projector != "gemma3")
    fail("clip.projector_type", "is '" + projector + "'; splitdec reads the gemma3 projector (Gemma-3's SigLIP tower) only");
  if (!f.boolean("clip.has_vision_encoder").value_or(false)) fail("clip.has_vision_encoder", "is not true: the file holds no vision tower");
  if (f.boolean("clip.use_silu").value_or(false)) fail("clip.use_silu", "is true; Gemma-3's tower uses GELU (tanh)");
  if (!f.boolean("clip.use_gelu").value_or(true)) fail("clip.use_gelu", "is false; Gemma-3's tower uses GELU (tanh)");
  auto count = [&](const std::string& key, int64_t limit) -> int64_t {
    const std::optional<int64_t> v = f.integer(key);
    if (!v) fail(key, "is missing");
    if (*v < 1 || *v > limit) fail(key, "value " + std::to_string(*v) + " is outside [1, " + std::to_string(limit) + "]");
    return *v;
  };
  json v;
  v["model_type"] = "siglip_vision_model";
  const int64_t hidden = count("clip.vision.embedding_length", 1 << 15);
  const int64_t heads = count("clip.vision.attention.head_count", 1024);
  if (hidden % heads != 0)
    fail("clip.vision.attention.head_count", "value " + std::to_string(heads) + " does not divide clip.vision.embedding_length " +
                                                 std::to_string(hidden));
  v["hidden_size"] = hidden;
  v["num_attention_heads"] = heads;
  v["intermediate_size"] = count("clip.vision.feed_forward_length", 1 << 17);
  v["num_hidden_layers"] = count("clip.vision.block_count", 256);
  // The image is resized to image_size x image_size; the tower attends over
  // all its patches at once. Gemma-3's is 896 px in 14 px patches (64 x 64).
  const int64_t image_size = count("clip.vision.image_size", kMaxMmprojImageSize);
  const int64_t patch = count("clip.vision.patch_size", image_size);
  if (image_size % patch != 0) fail("clip.vision.patch_size", "value " + std::to_string(patch) + " does not divide clip.vision.image_size " + std::to_string(image_size));
  const int64_t grid = image_size / patch;
  if (grid > kMaxMmprojGrid)
    fail("clip.vision.patch_size", "gives " + std::to_string(grid) + " x " + std::to_string(grid) + " patches, past the " +
                                       std::to_string(kMaxMmprojGrid) + " x " + std::to_string(kMaxMmprojGrid) +
                                       " this reader takes (Gemma-3: 64 x 64)");
  v["image_size"] = image_size;
  v["patch_size"] = patch;
  const double eps = f.number("clip.vision.attention.layer_norm_epsilon").value_or(1e-6);
  if (!(eps > 0 && eps <= 1)) fail("clip.vision.attention.layer_norm_epsilon", "must be in (0, 1], got " + std::to_string(eps));
  v["layer_norm_eps"] = eps;
  const int64_t projection = f.integer("clip.vision.projection_dim").value_or(text_hidden);
  if (projection != text_hidden)
    fail("clip.vision.projection_dim", "is " + std::to_string(projection) + ", but the text model's embedding_length is " +
                                           std::to_string(text_hidden) + ": the mmproj belongs to another model");
  // splitdec's Gemma-3 processor normalizes as Hugging Face's does: (x - 0.5) / 0.5.
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    const std::vector<double> values = f.numbers(key);
    if (values.empty()) continue;
    if (values.size() != 3) fail(key, "has " + std::to_string(values.size()) + " values, not 3 (RGB)");
    for (double x : values)
      if (!(std::abs(x - 0.5) <= 1e-6)) fail(key, "is not 0.5 for each channel, which Gemma-3's processor uses");
  }
  // The projector pools the patch grid by the scale factor on each side (4 unless the file says).
  const int64_t scale = f.integer("clip.vision.projector.scale_factor").value_or(4);
  if (scale < 1 || grid % scale != 0)
    fail("clip.vision.projector.scale_factor", "value " + std::to_string(scale) + " does not divide the " +
                                                   std::to_string(grid) + "-patch side of the image");
  *tokens_per_image = int((grid / scale) * (grid / scale));
  return v;
}

}  // namespace

json gemma3_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  json text_config = gemma3_config_from_gguf(text);
  int tokens_per_image = 0;
  json c;
  c["model_type"] = "gemma3";
  c["architectures"] = {"Gemma3ForConditionalGeneration"};
  c["vision_config"] = vision_config_of(mmproj, text_config["hidden_size"].get<int64_t>(), &tokens_per_image);
  c["mm_tokens_per_image"] = tokens_per_image;
  // The image markers by their pieces in the text model's vocabulary (the
  // ids the Gemma-3 processor uses: llama.cpp's mtmd finds them by text too).
  const std::vector<std::string_view> tokens = text.strings("tokenizer.ggml.tokens");
  const int64_t vocab = text_config["vocab_size"].get<int64_t>();
  auto id_of = [&](const char* piece) -> int64_t {
    for (size_t id = 0; id < tokens.size() && int64_t(id) < vocab; ++id)
      if (tokens[id] == piece) return int64_t(id);
    throw ConfigError(text.name() + ": the vocabulary (tokenizer.ggml.tokens) has no " + piece +
                      ", which an image block needs: is it a Gemma-3 model?");
  };
  c["boi_token_index"] = id_of("<start_of_image>");
  c["eoi_token_index"] = id_of("<end_of_image>");
  c["image_token_index"] = id_of("<image_soft_token>");
  c["text_config"] = std::move(text_config);
  return c;
}

ModelConfig gemma3_model_config_from_gguf_pair(const GgufFile& text, const GgufFile& mmproj) {
  const json j = gemma3_config_from_gguf_pair(text, mmproj);
  ModelConfig c = parse_model_config(j, text.name() + " + " + mmproj.name());
  c.norm_adds_one = false;        // the converter stored 1 + w
  c.embed_scale_rounded = false;  // llama.cpp scales by sqrtf(n_embd) in f32
  // llama.cpp caps the logits whenever the text file says so (Hugging Face's
  // multimodal class would not; Gemma-3 files do not say so).
  if (j["text_config"].contains("final_logit_softcapping"))
    c.final_logit_softcap = j["text_config"]["final_logit_softcapping"].get<float>();
  return c;
}

std::map<std::string, TensorView> gemma3_tensors_from_mmproj(const GgufFile& f) {
  // The first mmproj files (llama.cpp's examples/llava/gemma3_convert_encoder_to_gguf.py,
  // which made the first downloads) named fc1 ffn_down and fc2 ffn_up. clip.cpp
  // tells them apart by shape, per layer: an ffn_down whose rows are the
  // embedding width ([n_ff, n_embd], fc1's shape) is fc1. The same rule here.
  const int64_t n_embd = f.integer("clip.vision.embedding_length").value_or(-1);
  auto swapped_layer = [&](const std::string& block) {
    const GgufTensor* down = f.find_tensor(block + "ffn_down.weight");
    return down && f.find_tensor(block + "ffn_up.weight") && !down->ne.empty() && int64_t(down->ne[0]) == n_embd;
  };
  std::map<std::string, TensorView> out;
  for (const GgufTensor& t : f.tensors()) {
    std::string gguf_name = t.name;
    static const std::regex ffn(R"((v\.blk\.\d{1,4}\.)ffn_(up|down)\.(weight|bias))");
    std::smatch m;
    if (std::regex_match(t.name, m, ffn) && swapped_layer(m[1].str()))
      gguf_name = m[1].str() + "ffn_" + (m[2] == "up" ? "down" : "up") + "." + m[3].str();
    const std::string name = checkpoint_name(gguf_name);
    if (name.empty()) throw FormatError(f.name() + ": tensor '" + t.name + "' is not part of Gemma-3's vision tower");
    if (!out.emplace(name, gguf_tensor_view(f, t)).second)
      throw FormatError(f.name() + ": tensors '" + out.at(name).name + "' and '" + t.name + "' are the same tensor of the tower");
  }
  return out;
}

std::string mmproj_tensor_name(const std::string& name) {
  for (const auto& [ours, theirs] : global_names())
    if (name == theirs) return ours;
  static const std::regex layer(R"(model\.vision_tower\.vision_model\.encoder\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return "";
  for (const auto& [ours, theirs] : layer_names())
    if (m[2] == theirs) return "v.blk." + m[1].str() + "." + ours + "." + m[3].str();
  return "";
}

}  // namespace splitdec
