#include "onnx_export/onnx_package.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gemma_model.h"
#include "onnx_export/decoder_graphs.h"
#include "onnx_export/genai_files.h"
#include "onnx_export/media_graphs.h"
#include "onnx_export/onnx_graph.h"

namespace splitdec {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace onnx_export;

OnnxPackageKind parse_package_kind(const std::string& plan) {
  if (plan == "split") return OnnxPackageKind::Split;
  if (plan == "single") return OnnxPackageKind::Single;
  const bool known = plan == "split-copy" || plan == "unified" || plan == "reference";
  throw InputError((known ? "plan '" + plan + "' cannot be exported" : "unknown plan '" + plan + "'") +
                   ": an ONNX package is either 'split' (prefill + decode graphs on shared KV "
                   "buffers) or 'single' (one graph with a dense bias)");
}

const char* package_kind_name(OnnxPackageKind k) { return k == OnnxPackageKind::Split ? "split" : "single"; }

GenaiRoute parse_genai_route(const std::string& name) {
  if (name == "pipeline") return GenaiRoute::Pipeline;
  if (name == "multimodal") return GenaiRoute::Multimodal;
  throw InputError("unknown GenAI route '" + name + "' (valid: pipeline, multimodal)");
}

const char* genai_route_name(GenaiRoute r) { return r == GenaiRoute::Pipeline ? "pipeline" : "multimodal"; }

void check_onnx_export_options(const OnnxExportOptions& o) {
  // GroupQueryAttention takes seqlens_k and total_sequence_length as int32.
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (o.max_length < 1 || o.max_length > kInt32Max)
    throw InputError("max_length " + std::to_string(o.max_length) + " cannot be exported: it must be in [1, " +
                     std::to_string(kInt32Max) + "] (GroupQueryAttention's total_sequence_length is int32)");
  // The model needs no check of its own: the config loader already refuses
  // query heads that are not whole KV groups (both attention operators need
  // them) and odd head dims (the exported RoPE pairs them), and every mask
  // policy is expressible (decode steps are text: causal plus window).
}

void check_onnx_exportable(const ModelConfig& c) {
  // Experts would need a routed GEMM (top-k rows of 128 expert matrices per
  // token); no operator onnxruntime-node runs on CPU does that
  // (docs/onnx-export.md).
  for (const LayerSpec& l : c.layers)
    if (l.num_experts > 0)
      throw ConfigError("ONNX export: the mixture of experts (enable_moe_block, " + std::to_string(l.num_experts) +
                        " experts, Gemma-4 26B-A4B) is not exported; run the model with splitdec itself");
}

// ONNX Runtime GenAI a0c04eb13's multimodal route: model type gemma3 or
// gemma4, whose processors (gemma_image_processor.cpp,
// gemma4_multimodal_processor.cpp) make the ids and pixels and find the
// image tokens by their text.
void check_genai_route(const OnnxExportOptions& o, const ModelConfig& c, const ExportFrontends* f) {
  if (o.genai_route != GenaiRoute::Multimodal) return;
  const std::string what = "--genai-route multimodal";
  if (!f || f->config.vision == VisionFrontend::None)
    throw InputError(what + ": the model has no vision frontend (GenAI's multimodal route starts at vision.onnx)");
  if (f->config.vision == VisionFrontend::UnifiedPatches)
    throw InputError(what + ": gemma4_unified embeds " + std::to_string(f->config.unified.patch) +
                     " px patches without an encoder; GenAI's Gemma-4 processor makes 16 px patches for the Gemma-4 "
                     "vision encoder (gemma4 checkpoints with a vision_config)");
  if (!f->has_vision())
    throw InputError(what + ": the checkpoint has no vision tower weights, so no vision.onnx can be written");
  if (f->config.vision == VisionFrontend::Siglip && f->config.siglip.tokens() != 256)
    throw InputError(what + ": the model makes " + std::to_string(f->config.siglip.tokens()) +
                     " soft tokens an image; GenAI's Gemma-3 processor expands every image to 256 "
                     "(gemma_image_processor.cpp), e.g. the preset tiny-gemma3-img256 or a real checkpoint");
  if (f->config.vision == VisionFrontend::Gemma4Encoder && f->config.gemma4_pool != 3)
    throw InputError(what + ": the image processor pools " + std::to_string(f->config.gemma4_pool) + " x " +
                     std::to_string(f->config.gemma4_pool) + " patches; GenAI's Gemma-4 processor counts 3 x 3 "
                     "(kPoolingKernelSize in gemma4_multimodal_processor.cpp)");
  require_tokenizer_files(o.model_dir);
  require_image_token_strings(o.model_dir, genai_image_family(f->config.vision).tokens, c.boi_token_id,
                              c.image_token_id, c.eoi_token_id);
}

namespace {

// GenAI's multimodal route feeds vision.onnx the processor's stacked images.
VisionImages vision_images(GenaiRoute route) {
  return route == GenaiRoute::Multimodal ? VisionImages::Stacked : VisionImages::OnePerRun;
}

// model.vision / model.speech with only the keys that ONNX Runtime GenAI's
// config parser knows for them (src/config.cpp, see docs/onnx-export.md):
// filename, inputs, outputs, config_filename (the multimodal route's
// processor files); the key names map to our graph names. Their input
// layouts in words go to splitdec.json.
void add_media_sections(const ExportFrontends& f, GenaiRoute route, json& cfg, json& ours) {
  json& model = cfg["model"];
  json& media = ours["media"];
  if (f.has_vision()) {
    json inputs = {{"pixel_values", media_names::kPixelValues}};
    if (vision_graph_takes_positions(f.config)) inputs["pixel_position_ids"] = media_names::kImagePositionIds;
    model["vision"] = {{"filename", kOnnxVisionFile},
                       {"inputs", inputs},
                       {"outputs", {{"image_features", media_names::kImageFeatures}}}};
    if (route == GenaiRoute::Multimodal) model["vision"]["config_filename"] = kGenaiProcessorFile;
    media["vision"] = vision_graph_layout(f.config, vision_images(route));
  }
  // GenAI's gemma4 type (an "MMM" model) refuses a speech config file
  // without a speech model, and its config names one by default
  // (audio_processor_config.json): cleared here, replaced below when there
  // is a speech graph.
  if (route == GenaiRoute::Multimodal && f.config.vision == VisionFrontend::Gemma4Encoder)
    model["speech"] = {{"config_filename", ""}};
  if (f.has_audio()) {
    model["speech"] = {{"filename", kOnnxSpeechFile},
                       {"inputs", {{"audio_embeds", media_names::kAudioFrames}}},
                       {"outputs", {{"audio_features", media_names::kAudioFeatures}}}};
    media["speech"] = "audio_frames [num_frames, " + std::to_string(f.config.audio_shape.frame) +
                      "]: 16 kHz mono samples cut into frames, the last zero-padded";
  }
}

// One stage of ONNX Runtime GenAI's decoder pipeline. The runtime hands a
// stage the managed inputs it lists (input_ids, attention_mask,
// position_ids, the KV buffers), the outputs of earlier stages it lists
// (inputs_embeds) and the extra inputs the caller bound (media_embeds);
// prompt runs (more than one token) take the run_on_prompt stages, single
// tokens the run_on_token_gen ones (src/models/decoder_only_pipeline.cpp).
json pipeline_stage(const char* file, const json& inputs, const json& outputs, bool on_prompt, bool on_token) {
  return {{"filename", file}, {"inputs", inputs}, {"outputs", outputs}, {"run_on_prompt", on_prompt},
          {"run_on_token_gen", on_token}};
}

// genai_config.json: only keys and values that ONNX Runtime GenAI's parser
// accepts (tests/data/onnxruntime_genai/config_keys.json lists them, from
// its src/config.cpp). Both plans are `decoder-pipeline` models whose first
// stage is the embedding graph, so input_ids is consumed and inputs_embeds
// produced inside the pipeline.
json genai_config(const Model& model, const OnnxExportOptions& o, const ExportFrontends* frontends) {
  const ModelConfig& c = model.config();
  const bool split = o.plan == OnnxPackageKind::Split;
  const json decoder_inputs = {{"input_ids", names::kInputIds},
                               {"inputs_embeds", names::kInputsEmbeds},
                               {"attention_mask", names::kAttentionMask},
                               {"position_ids", names::kPositionIds},
                               {"past_key_names", "past_key_values.%d.key"},
                               {"past_value_names", "past_key_values.%d.value"}};
  const json decoder_outputs = {
      {"logits", names::kLogits}, {"present_key_names", "present.%d.key"}, {"present_value_names", "present.%d.value"}};
  // A decoder stage: the token ids where it builds a mask (blocks are runs of
  // vision token ids), the embeddings, positions, mask and every owned KV buffer.
  auto decoder_stage = [&](const char* file, bool takes_ids, bool on_prompt, bool on_token) {
    json in = json::array();
    if (takes_ids) in.push_back(names::kInputIds);
    for (const char* n : {names::kInputsEmbeds, names::kAttentionMask, names::kPositionIds}) in.push_back(n);
    if (c.per_layer_dim > 0) in.push_back(names::kPerLayerInputs);
    json out = {names::kLogits};
    for (int l = 0; l < c.num_layers; ++l)
      if (!c.is_kv_shared(l))
        for (bool key : {true, false}) in.push_back(names::past(l, key)), out.push_back(names::present(l, key));
    return pipeline_stage(file, in, out, on_prompt, on_token);
  };
  json pipeline = json::array();
  // Two embedding stages: prompt runs place the media rows; generation runs
  // embed every id as text, as splitdec does, so a generated media id (a
  // random or fine-tuned model may emit one) is a text row, never a media row
  // (or a Gather out of bounds on an empty media_embeds).
  json embedding_out = {names::kInputsEmbeds};
  if (c.per_layer_dim > 0) embedding_out.push_back(names::kPerLayerInputs);
  pipeline.push_back({{"embedding", pipeline_stage(kOnnxEmbeddingFile, {names::kInputIds, names::kMediaEmbeds},
                                                   embedding_out, true, false)}});
  pipeline.push_back({{"token_embedding", pipeline_stage(kOnnxTokenEmbeddingFile, {names::kInputIds}, embedding_out, false, true)}});
  if (split) {
    pipeline.push_back({{"prefill", decoder_stage(kOnnxPrefillFile, true, true, false)}});
    pipeline.push_back({{"decode", decoder_stage(kOnnxDecodeFile, false, false, true)}});
  } else {
    pipeline.push_back({{"decoder", decoder_stage(kOnnxSingleFile, true, true, true)}});
  }
  const json decoder = {{"head_size", c.layers[0].head_dim},
                        {"hidden_size", c.hidden_size},
                        {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.layers[0].num_kv_heads},
                        {"num_hidden_layers", c.num_layers},
                        {"inputs", decoder_inputs},
                        {"outputs", decoder_outputs},
                        {"pipeline", pipeline}};
  const bool multimodal = o.genai_route == GenaiRoute::Multimodal;
  // GenAI picks the processor by the model type (check_genai_route made
  // sure the multimodal route has a frontend it takes).
  json m = {{"type", multimodal ? genai_image_family(frontends->config.vision).model_type : "decoder-pipeline"},
            {"bos_token_id", c.bos_token_id},
            {"eos_token_id", json(c.eos_token_ids)},
            {"pad_token_id", c.pad_token_id},
            {"vocab_size", c.vocab_size},
            {"context_length", o.max_length},
            {"decoder", decoder}};
  if (multimodal && !split) {
    // Stock GenAI's multimodal model (MultiModalLanguageModel): the
    // embedding graph on every run (a one-token run embeds every id as
    // text), then one decoder graph.
    m["decoder"].erase("pipeline");
    m["decoder"]["filename"] = kOnnxSingleFile;
    m["embedding"] = {{"filename", kOnnxEmbeddingFile},
                      {"inputs", {{"input_ids", names::kInputIds}, {"image_features", names::kMediaEmbeds}}},
                      {"outputs", {{"inputs_embeds", names::kInputsEmbeds}}}};
    // Per-layer embeddings (E2B / E4B): GenAI's gemma4 route hands the
    // embedding graph's per_layer_inputs to the decoder.
    if (c.per_layer_dim > 0) {
      m["embedding"]["outputs"]["per_layer_inputs"] = names::kPerLayerInputs;
      m["decoder"]["inputs"]["per_layer_inputs"] = names::kPerLayerInputs;
    }
  } else if (multimodal) {
    // GenAI with contrib/onnxruntime-genai (GemmaPipelineModel): the
    // pipeline as above; the vision output becomes the pipeline value the
    // prompt-stage embedding reads as media_embeds.
    m["embedding"] = {{"inputs", {{"image_features", names::kMediaEmbeds}}}};
  }
  for (auto [key, id] : {std::pair{"image_token_id", c.image_token_id}, {"video_token_id", c.video_token_id},
                         {"audio_token_id", c.audio_token_id}})
    if (id >= 0) m[key] = id;
  return {{"model", m}, {"search", {{"max_length", o.max_length}, {"past_present_share_buffer", split}}}};
}

// splitdec.json: what ONNX Runtime GenAI has no keys for (its parser refuses
// unknown keys, so this lives beside genai_config.json).
json splitdec_config(const Model& model, const OnnxExportOptions& o, MaskPolicy policy) {
  const ModelConfig& c = model.config();
  json kv_layers = json::array();
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerSpec& s = c.layers[size_t(l)];
    kv_layers.push_back({{"layer", l},
                         {"type", s.type == LayerType::Sliding ? "sliding" : "full"},
                         {"kv_source", s.kv_source},
                         {"kv_heads", s.num_kv_heads},
                         {"head_dim", s.head_dim},
                         {"window", s.window}});
  }
  json out = {{"plan", package_kind_name(o.plan)},
          {"genai_route", genai_route_name(o.genai_route)},
          {"mask_policy", mask_policy_name(policy)},
          {"max_length", o.max_length},
          {"media_blocks",
           "each maximal run of image/video token ids in one prefill call is one bidirectional block; a block "
           "lies whole in one prefill call"},
          {"media_embeds",
           "bind always: [rows, hidden] float, the media rows of this run's image/video/audio tokens in order "
           "(unscaled), [0, hidden] for text; rows past the last media token are not read"},
          {"media_token_ids", {{"image", c.image_token_id}, {"video", c.video_token_id}, {"audio", c.audio_token_id}}},
          {"layers", kv_layers}};
  if (c.per_layer_dim > 0)
    out["per_layer_inputs"] = "[batch, sequence, " + std::to_string(c.num_layers) + " * " + std::to_string(c.per_layer_dim) +
                              "] float, layer-major: made by the embedding graph from the ids (pad on media rows) and inputs_embeds, "
                              "read by every decoder stage; passed between stages like inputs_embeds";
  return out;
}

}  // namespace

OnnxPackage export_onnx_package(const Model& model, const std::string& out_dir, const OnnxExportOptions& o,
                                const ExportFrontends* frontends) {
  check_onnx_export_options(o);
  check_onnx_exportable(model.config());
  check_genai_route(o, model.config(), frontends);
  const bool multimodal = o.genai_route == GenaiRoute::Multimodal;
  const MaskPolicy policy = o.policy.value_or(model.config().default_policy);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw InputError("cannot create " + out_dir + ": " + ec.message());
  // A folder reused for another plan must not keep the other plan's graphs.
  // Never the model folder itself: it may hold a processor_config.json of its
  // own (HF's, which splitdec reads) and the tokenizer files the package copies.
  if (!o.model_dir.empty() && fs::equivalent(out_dir, o.model_dir, ec))
    throw InputError("--out " + out_dir + " is the model folder; write the package into a folder of its own");
  std::vector<std::string> stale = tokenizer_file_names();
  for (const char* name : {kOnnxEmbeddingFile, kOnnxTokenEmbeddingFile, kOnnxPrefillFile, kOnnxDecodeFile,
                           kOnnxSingleFile, kOnnxVisionFile, kOnnxSpeechFile, kGenaiProcessorFile})
    stale.push_back(name);
  for (const std::string& name : stale) {
    fs::remove(fs::path(out_dir) / name, ec);
    if (ec) throw InputError("cannot replace " + (fs::path(out_dir) / name).string() + ": " + ec.message());
  }

  OnnxPackage pkg;
  WeightFile weights(out_dir, kOnnxWeightsFile);
  GraphSettings settings{policy, o.max_length};
  auto write = [&](GraphKind kind, const char* file) {
    onnx::ModelProto m;
    build_graph(model, kind, settings, weights, m);
    save_model(m, (fs::path(out_dir) / file).string());
    pkg.files.push_back(file);
  };
  write(GraphKind::Embedding, kOnnxEmbeddingFile);
  // The pipeline's generation-run embedding (stock GenAI's multimodal model
  // runs the one embedding graph on every run instead).
  if (!multimodal || o.plan == OnnxPackageKind::Split) write(GraphKind::TokenEmbedding, kOnnxTokenEmbeddingFile);
  if (o.plan == OnnxPackageKind::Split) {
    write(GraphKind::SplitPrefill, kOnnxPrefillFile);
    write(GraphKind::SplitDecode, kOnnxDecodeFile);
  } else {
    write(GraphKind::Single, kOnnxSingleFile);
  }
  auto write_media = [&](auto build, const char* file) {
    onnx::ModelProto m;
    build(*frontends, weights, m);
    save_model(m, (fs::path(out_dir) / file).string());
    pkg.files.push_back(file);
  };
  if (frontends && frontends->has_vision())
    write_media([&](const ExportFrontends& f, WeightFile& w, onnx::ModelProto& m) {
      build_vision_graph(f, vision_images(o.genai_route), w, m);
    }, kOnnxVisionFile);
  if (frontends && frontends->has_audio()) write_media(build_speech_graph, kOnnxSpeechFile);
  weights.close();
  pkg.weight_bytes = weights.bytes();
  pkg.files.push_back(kOnnxWeightsFile);

  json config = genai_config(model, o, frontends), ours = splitdec_config(model, o, policy);
  if (frontends) add_media_sections(*frontends, o.genai_route, config, ours);
  const json processor = multimodal ? image_processor_config(*frontends) : json();
  std::vector<std::pair<const char*, const json*>> configs = {{kGenaiConfigFile, &config}, {kSplitdecConfigFile, &ours}};
  if (multimodal) configs.push_back({kGenaiProcessorFile, &processor});
  for (const auto& [file, content] : configs) {
    std::ofstream out(fs::path(out_dir) / file);
    out << content->dump(2) << "\n";
    if (!out) throw InputError("cannot write " + (fs::path(out_dir) / file).string());
    pkg.files.push_back(file);
  }
  for (const std::string& file : copy_tokenizer_files(o.model_dir, out_dir)) pkg.files.push_back(file);
  return pkg;
}

}  // namespace splitdec
