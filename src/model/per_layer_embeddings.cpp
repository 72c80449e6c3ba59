#include "model/per_layer_embeddings.h"

#include <cmath>
#include <string>

#include "core/aligned_vector.h"
#include "core/error.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace splitdec {

void per_layer_inputs(const ModelConfig& c, const ModelWeights& w, const int* table_tokens, const float* embeddings, int rows,
                      float* out, bool rows_independent, const CpuContext& cpu) {
  const int L = c.num_layers, P = c.per_layer_dim, H = c.hidden_size;
  const int64_t LP = int64_t(L) * P;
  // The projection of the input embedding, all layers at once: [rows, L * P].
  AlignedVector<float> projected(size_t(rows) * size_t(LP));
  linear(embeddings, rows, w.per_layer_model_projection, projected.data(), rows_independent, cpu);
  const float projection_scale = 1.f / std::sqrt(float(H));
  for (float& x : projected) x *= projection_scale;
  ops::rms_norm(projected.data(), w.per_layer_projection_norm.data(), int(int64_t(rows) * L), P, c.rms_norm_eps,
                c.norm_adds_one, projected.data());
  // The table's rows, scaled as Hugging Face's scaled embedding does (the
  // scale rounded to the table's type; in f32 for a GGUF, as llama.cpp).
  const float table_scale = round_to_dtype(std::sqrt(float(P)), c.embed_scale_rounded ? w.per_layer_table.dtype() : DType::F32);
  const float combine = 1.f / std::sqrt(2.f);
  std::vector<float> row(static_cast<size_t>(LP));
  for (int r = 0; r < rows; ++r) {
    const int token = table_tokens[r];
    if (token < 0 || token >= w.per_layer_table.rows())
      throw InputError("token id " + std::to_string(token) + " is past the per-layer embedding table (" +
                       std::to_string(w.per_layer_table.rows()) + " rows, vocab_size_per_layer_input)");
    w.per_layer_table.row_f32(token, row.data());
    const float* p = projected.data() + int64_t(r) * LP;
    for (int l = 0; l < L; ++l) {
      float* o = out + (int64_t(l) * rows + r) * P;
      const int64_t at = int64_t(l) * P;
      for (int k = 0; k < P; ++k) o[k] = (p[at + k] + row[size_t(at + k)] * table_scale) * combine;
    }
  }
}

void add_per_layer_input(const ModelConfig& c, const LayerWeights& w, const float* input, float* hidden, int rows,
                         bool rows_independent, const CpuContext& cpu) {
  const int P = c.per_layer_dim, H = c.hidden_size;
  AlignedVector<float> gate(size_t(rows) * size_t(P)), projected(size_t(rows) * size_t(H));
  linear(hidden, rows, w.per_layer_input_gate, gate.data(), rows_independent, cpu);
  ops::gelu_tanh_gate(gate.data(), input, gate.size(), cpu);
  linear(gate.data(), rows, w.per_layer_projection, projected.data(), rows_independent, cpu);
  ops::rms_norm(projected.data(), w.post_per_layer_input_norm.data(), rows, H, c.rms_norm_eps, c.norm_adds_one, projected.data());
  ops::residual_add(hidden, projected.data(), projected.size());
}

}  // namespace splitdec
