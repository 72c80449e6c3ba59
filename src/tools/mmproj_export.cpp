#include "tools/mmproj_export.h"

#include <filesystem>

#include "core/error.h"
#include "io/families/gemma3_mmproj.h"
#include "io/families/gemma4_mmproj.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/weight_matrix.h"
#include "media/frontend_config.h"
#include "media/frontend_weights.h"

namespace splitdec {

namespace fs = std::filesystem;

namespace {

void gemma3_keys(GgufMetadata& m, const SiglipShape& s) {
  m.add_string("clip.projector_type", "gemma3");
  m.add_bool("clip.has_vision_encoder", true);
  m.add_u32("clip.vision.projection_dim", uint32_t(s.text_hidden));
  m.add_u32("clip.vision.image_size", uint32_t(s.image_size));
  m.add_u32("clip.vision.patch_size", uint32_t(s.patch));
  m.add_u32("clip.vision.embedding_length", uint32_t(s.hidden));
  m.add_u32("clip.vision.feed_forward_length", uint32_t(s.intermediate));
  m.add_u32("clip.vision.block_count", uint32_t(s.layers));
  m.add_u32("clip.vision.attention.head_count", uint32_t(s.heads));
  m.add_f32s("clip.vision.image_mean", {0.5f, 0.5f, 0.5f});
  m.add_f32s("clip.vision.image_std", {0.5f, 0.5f, 0.5f});
  m.add_f32("clip.vision.attention.layer_norm_epsilon", s.layer_norm_eps);
  m.add_bool("clip.use_gelu", true);
  if (s.pool != 4) m.add_u32("clip.vision.projector.scale_factor", uint32_t(s.pool));  // only when not the default
}

// Gemma4VisionAudioModel's keys (conversion/gemma.py, base.py). What
// llama.cpp hard-codes for these towers (docs/gemma4-mmproj-facts.md) a
// folder must have, or the file would stand for another model.
void gemma4_keys(GgufMetadata& m, const FrontendConfig& f, const std::string& dir) {
  auto refuse = [&](const std::string& what) {
    throw InputError(dir + ": " + what + ", which an mmproj cannot say (llama.cpp's Gemma-4 towers hard-code it)");
  };
  if (f.vision == VisionFrontend::Gemma4Encoder) {
    const Gemma4VisionShape& s = f.gemma4;
    if (s.rope_theta != 100.0) refuse("the vision encoder's rope_theta is " + std::to_string(s.rope_theta) + ", not 100");
    m.add_bool("clip.has_vision_encoder", true);
    m.add_string("clip.vision.projector_type", "gemma4v");
    m.add_u32("clip.vision.projection_dim", uint32_t(s.text_hidden));
    m.add_u32("clip.vision.image_size", 224);  // the converter's constant; the processor sizes images itself
    m.add_u32("clip.vision.patch_size", uint32_t(s.patch));
    m.add_u32("clip.vision.embedding_length", uint32_t(s.hidden));
    m.add_u32("clip.vision.feed_forward_length", uint32_t(s.intermediate));
    m.add_u32("clip.vision.block_count", uint32_t(s.layers));
    m.add_u32("clip.vision.attention.head_count", uint32_t(s.heads));
    // clip.cpp's defaults are E / H, H and 3: written only where the model differs.
    if (s.head_dim * s.heads != s.hidden) m.add_u32("clip.vision.attention.head_dim", uint32_t(s.head_dim));
    if (s.kv_heads != s.heads) m.add_u32("clip.vision.attention.head_count_kv", uint32_t(s.kv_heads));
    if (s.pool != 3) m.add_u32("clip.vision.projector.scale_factor", uint32_t(s.pool));
    m.add_f32s("clip.vision.image_mean", {0.f, 0.f, 0.f});
    m.add_f32s("clip.vision.image_std", {1.f, 1.f, 1.f});
    m.add_f32("clip.vision.attention.layer_norm_epsilon", s.rms_norm_eps);
  }
  if (f.audio == AudioFrontend::Conformer) {
    const ConformerAudioShape& a = f.conformer;
    const ConformerAudioShape defaults;
    if (a.chunk != defaults.chunk || a.context_left != defaults.context_left)
      refuse("the audio encoder's attention chunk / left context are " + std::to_string(a.chunk) + " / " +
             std::to_string(a.context_left) + ", not 12 / 13");
    if (a.logit_cap != defaults.logit_cap || a.invalid_logit != defaults.invalid_logit || a.residual_weight != defaults.residual_weight ||
        a.rms_norm_eps != defaults.rms_norm_eps || a.gradient_clipping != defaults.gradient_clipping)
      refuse("the audio encoder's logit cap, residual weight, norm eps or gradient clipping differ from Gemma-4's");
    m.add_bool("clip.has_audio_encoder", true);
    m.add_string("clip.audio.projector_type", "gemma4a");
    m.add_u32("clip.audio.projection_dim", uint32_t(a.text_hidden));
    m.add_u32("clip.audio.embedding_length", uint32_t(a.hidden));
    m.add_u32("clip.audio.feed_forward_length", uint32_t(4 * a.hidden));
    m.add_u32("clip.audio.block_count", uint32_t(a.layers));
    m.add_u32("clip.audio.attention.head_count", uint32_t(a.heads));
    m.add_u32("clip.audio.num_mel_bins", uint32_t(a.features.bins));
    m.add_f32("clip.audio.attention.layer_norm_epsilon", a.rms_norm_eps);
  }
}

// The converter's F32 tensors (base.py, gemma.py): everything but the
// layers' matrices and the projections; Gemma-4's audio convs too.
bool kept_f32(const FrontendTensor& t, const std::string& gguf_name, const std::vector<int64_t>& shape, bool gemma4) {
  if (t.kind != FrontendTensor::Matrix && t.kind != FrontendTensor::TransposedMatrix) return true;
  if (shape.size() != 2) return !(gemma4 && gguf_name == "v.patch_embd.weight");  // conv kernels (the patch embedding: the matrix type)
  if (gemma4 && (t.name.find(".conv") != std::string::npos || t.name.find("_conv") != std::string::npos)) return true;
  return false;
}

}  // namespace

int export_mmproj(const MmprojExportOptions& o) {
  uint32_t matrix_type = 0;
  if (o.weights == "f32") matrix_type = ggml_type::F32;
  else if (o.weights == "f16") matrix_type = ggml_type::F16;
  else if (o.weights == "bf16") matrix_type = ggml_type::BF16;
  else if (o.weights == "q8") matrix_type = ggml_type::Q8_0;  // the converter's --outtype q8_0
  else throw InputError("--out-mmproj is written with f32, f16, bf16 or q8 (Q8_0) matrices, not " + o.weights);
  if (is_gguf_path(o.model_dir)) throw InputError("--model " + o.model_dir + " is a GGUF; --out-mmproj writes a model folder's media towers");
  const ModelConfig config = load_model_config(o.model_dir);
  const FrontendConfig frontend = load_frontend_config(o.model_dir, config);
  const bool gemma4 = frontend.vision == VisionFrontend::Gemma4Encoder || frontend.audio == AudioFrontend::Conformer;
  if (frontend.vision != VisionFrontend::Siglip && !gemma4)
    throw InputError(o.model_dir + ": --out-mmproj writes Gemma-3's SigLIP vision tower or Gemma-4's vision and audio encoders, "
                     "which this model (" + config.model_type + ") does not have");
  if (gemma4 && frontend.vision != VisionFrontend::Gemma4Encoder && frontend.vision != VisionFrontend::None)
    throw InputError(o.model_dir + ": its vision frontend has no mmproj form in llama.cpp (the gemma4v projector is the "
                     "encoder's); write it without --out-mmproj");
  if (!gemma4) {
    const SiglipShape& s = frontend.siglip;
    // Readers tell the first files' swapped ffn names apart by shape
    // (io/families/gemma3_mmproj.h): a square MLP would read back swapped.
    if (s.intermediate == s.hidden)
      throw InputError(o.model_dir + ": the vision tower's intermediate_size equals its hidden_size (" + std::to_string(s.hidden) +
                       "), which an mmproj cannot hold unambiguously (llama.cpp would read its MLP swapped)");
  }
  const TensorStore store = TensorStore::open_dir(o.model_dir);

  GgufMetadata m;
  m.add_string("general.architecture", "clip");
  m.add_string("general.type", "mmproj");
  fs::path folder(o.model_dir);
  if (!folder.has_filename()) folder = folder.parent_path();
  m.add_string("general.name", folder.filename().string());
  m.add_u32("general.file_type", matrix_type == ggml_type::F32    ? 0
                                 : matrix_type == ggml_type::F16  ? 1
                                 : matrix_type == ggml_type::Q8_0 ? 7
                                                                  : 32);
  if (gemma4) gemma4_keys(m, frontend, o.model_dir);
  else gemma3_keys(m, frontend.siglip);

  // The towers' tensors in make-model's order, under llama.cpp's names.
  FrontendWeights unused;
  struct Plan {
    const TensorView* view;
    uint32_t type;
    bool plus_one;
    Gemma4MmprojChange change;
  };
  std::vector<Plan> plans;
  std::vector<GgufWriter::Entry> entries;
  for (const FrontendTensor& t : frontend_tensors(frontend, unused)) {
    const TensorView* v = store.find(t.name);
    for (size_t a = 0; !v && a < t.aliases.size(); ++a) v = store.find(t.aliases[a]);
    if (!v) {
      // Clip bounds a checkpoint leaves out are infinite: the file leaves them out too.
      if (t.kind == FrontendTensor::ClipLow || t.kind == FrontendTensor::ClipHigh) continue;
      throw FormatError(store.describe() + ": the media tower's tensor '" + t.name + "' is missing");
    }
    if (!dtype_is_float(v->dtype))
      throw InputError("--model " + o.model_dir + ": tensor '" + v->name + "' is " + dtype_name(v->dtype) +
                       "; write the mmproj from the float checkpoint");
    const bool scalar = t.kind == FrontendTensor::ClipLow || t.kind == FrontendTensor::ClipHigh;
    if (scalar ? v->numel() != 1 : v->shape != t.shape) throw FormatError(v->file + ": tensor '" + v->name + "' is not of the config's shape");
    const std::string name = gemma4 ? gemma4_mmproj_tensor_name(t.name) : mmproj_tensor_name(t.name);
    if (name.empty()) throw FormatError("tensor '" + t.name + "' has no name in llama.cpp's mmproj files");
    const Gemma4MmprojChange change = gemma4 ? gemma4_mmproj_change(t.name) : Gemma4MmprojChange::None;
    // ggml order is the shape reversed; the converter's own reshapes first.
    std::vector<uint64_t> ne(v->shape.rbegin(), v->shape.rend());
    if (scalar) ne = {1};
    if (change == Gemma4MmprojChange::PatchToConv) {
      const uint64_t P = uint64_t(frontend.gemma4.patch);
      ne = {P, P, 3, uint64_t(v->shape[0])};
    }
    if (gemma4 && t.name.ends_with("lconv1d.depthwise_conv1d.weight")) ne = {uint64_t(v->shape[2]), uint64_t(v->shape[0])};
    uint32_t type = ggml_type::F32;
    if (!gemma4 && name == "mm.input_projection.weight") type = matrix_type == ggml_type::F32 ? ggml_type::F32 : ggml_type::F16;
    else if (gemma4 && name == "v.patch_embd.weight") type = matrix_type == ggml_type::F16 ? ggml_type::F16 : ggml_type::F32;
    else if (!kept_f32(t, name, v->shape, gemma4))
      type = matrix_type == ggml_type::Q8_0 && v->shape[1] % 32 != 0 ? ggml_type::F16 : matrix_type;  // rows of whole blocks
    entries.push_back({name, type, ne});
    plans.push_back({v, type, t.kind == FrontendTensor::GainMinusOne, change});
  }

  GgufWriter out(o.out_path, m, entries);
  for (size_t k = 0; k < plans.size(); ++k) {
    if (o.progress) o.progress(k, plans.size());
    const Plan& p = plans[k];
    std::vector<float> values = p.view->to_f32();
    if (p.plus_one)  // Gemma3RMSNorm's (1 + w), stored added as the converter does
      for (float& x : values) x += 1.f;
    values = gemma4_mmproj_to_file(p.change, std::move(values), frontend.gemma4.patch);  // Gemma-4's permutation, softplus
    store.release(*p.view);  // copied out: its file pages need not stay resident
    if (p.type == ggml_type::F32) {
      out.write(values.data(), values.size() * sizeof(float));
      continue;
    }
    const int rows = int(p.view->shape[0]), cols = int(values.size() / size_t(rows));
    WeightMatrix w;
    try {
      const WeightFormat f = p.type == ggml_type::F16    ? WeightFormat::F16
                             : p.type == ggml_type::Q8_0 ? WeightFormat::Q8_0
                                                         : WeightFormat::BF16;
      w = WeightMatrix::from_f32(f, rows, cols, values.data());
    } catch (const InputError& e) {
      throw InputError("tensor '" + p.view->name + "' cannot be written as " + ggml_type_name(p.type) + ": " + e.what());
    }
    out.write(w.data.data(), w.data.size());
  }
  if (o.progress) o.progress(plans.size(), plans.size());
  out.finish();
  return int(plans.size());
}

}  // namespace splitdec
