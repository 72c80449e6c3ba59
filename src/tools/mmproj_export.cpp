#include "tools/mmproj_export.h"

#include <filesystem>

#include "core/error.h"
#include "io/families/gemma3_mmproj.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/weight_matrix.h"
#include "media/frontend_config.h"
#include "media/frontend_weights.h"

namespace splitdec {

namespace fs = std::filesystem;

int export_mmproj(const MmprojExportOptions& o) {
  uint32_t matrix_type = 0;
  if (o.weights == "f32") matrix_type = ggml_type::F32;
  else if (o.weights == "f16") matrix_type = ggml_type::F16;
  else if (o.weights == "bf16") matrix_type = ggml_type::BF16;
  else if (o.weights == "q8") matrix_type = ggml_type::Q8_0;  // the converter's --outtype q8_0
  else throw InputError("--out-mmproj is written with f32, f16, bf16 or q8 (Q8_0) matrices, not " + o.weights);
  if (is_gguf_path(o.model_dir)) throw InputError("--model " + o.model_dir + " is a GGUF; --out-mmproj writes a model folder's vision tower");
  const ModelConfig config = load_model_config(o.model_dir);
  const FrontendConfig frontend = load_frontend_config(o.model_dir, config);
  if (frontend.vision != VisionFrontend::Siglip)
    throw InputError(o.model_dir + ": --out-mmproj writes Gemma-3's SigLIP vision tower, which this model (" + config.model_type +
                     ") does not have");
  const SiglipShape& s = frontend.siglip;
  // Readers tell the first files' swapped ffn names apart by shape
  // (io/families/gemma3_mmproj.h): a square MLP would read back swapped.
  if (s.intermediate == s.hidden)
    throw InputError(o.model_dir + ": the vision tower's intermediate_size equals its hidden_size (" + std::to_string(s.hidden) +
                     "), which an mmproj cannot hold unambiguously (llama.cpp would read its MLP swapped)");
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

  // The tower's tensors in make-model's order, under llama.cpp's names.
  FrontendWeights unused;
  struct Plan {
    const TensorView* view;
    uint32_t type;
    bool plus_one;
  };
  std::vector<Plan> plans;
  std::vector<GgufWriter::Entry> entries;
  for (const FrontendTensor& t : frontend_tensors(frontend, unused)) {
    const TensorView* v = store.find(t.name);
    for (size_t a = 0; !v && a < t.aliases.size(); ++a) v = store.find(t.aliases[a]);
    if (!v) throw FormatError(store.describe() + ": the vision tower's tensor '" + t.name + "' is missing");
    if (!dtype_is_float(v->dtype))
      throw InputError("--model " + o.model_dir + ": tensor '" + v->name + "' is " + dtype_name(v->dtype) +
                       "; write the mmproj from the float checkpoint");
    if (v->shape != t.shape) throw FormatError(v->file + ": tensor '" + v->name + "' is not of the config's shape");
    const std::string name = mmproj_tensor_name(t.name);
    uint32_t type = ggml_type::F32;
    if (name == "mm.input_projection.weight") type = matrix_type == ggml_type::F32 ? ggml_type::F32 : ggml_type::F16;
    else if (t.kind == FrontendTensor::Matrix && v->shape.size() == 2)
      type = matrix_type == ggml_type::Q8_0 && v->shape[1] % 32 != 0 ? ggml_type::F16 : matrix_type;  // rows of whole blocks
    entries.push_back({name, type, std::vector<uint64_t>(v->shape.rbegin(), v->shape.rend())});
    plans.push_back({v, type, t.kind == FrontendTensor::GainMinusOne});
  }

  GgufWriter out(o.out_path, m, entries);
  for (size_t k = 0; k < plans.size(); ++k) {
    if (o.progress) o.progress(k, plans.size());
    const Plan& p = plans[k];
    std::vector<float> values = p.view->to_f32();
    if (p.plus_one)  // Gemma3RMSNorm's (1 + w), stored added as the converter does
      for (float& x : values) x += 1.f;
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
