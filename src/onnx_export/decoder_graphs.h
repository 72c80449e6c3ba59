// The ONNX graphs of an exported package. The layer math is a transcription
// of src/model/gemma_model.cpp (kept line for line comparable); the mask is a
// transcription of src/mask/mask_contract.h. The ONNX Runtime tests hold both
// to splitdec's logits.
#pragma once

#include <cstdint>
#include <string>

#include "mask/mask_contract.h"

namespace onnx {
class ModelProto;
}

namespace splitdec {
class Model;
}

namespace splitdec::onnx_export {

class WeightFile;

enum class GraphKind {
  Embedding,       // token ids + media rows -> inputs_embeds (+ per_layer_inputs): prompt runs
  TokenEmbedding,  // token ids -> inputs_embeds, every id as text (a generated media id too): generation runs
  SplitPrefill,  // Attention with the policy's mask; K/V written in place by TensorScatter
  SplitDecode,   // com.microsoft.GroupQueryAttention on the same buffers
  Single,        // Attention + dense float bias every step, separate past/present
};

struct GraphSettings {
  MaskPolicy policy = MaskPolicy::Causal;
  int64_t max_length = 0;  // the shared KV buffers' length (split graphs)
};

// Graph input/output names (the pipeline runtime binds by name).
namespace names {
inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kMediaEmbeds = "media_embeds";
inline constexpr const char* kInputsEmbeds = "inputs_embeds";
inline constexpr const char* kAttentionMask = "attention_mask";
inline constexpr const char* kPositionIds = "position_ids";
inline constexpr const char* kLogits = "logits";
// Per-layer embeddings (Gemma-4 E2B / E4B): [batch, sequence, layers * P]
// (layer-major), made by the embedding graph, read by every layer of the
// decoder graphs.
inline constexpr const char* kPerLayerInputs = "per_layer_inputs";
std::string past(int layer, bool key);     // past_key_values.N.key / .value
std::string present(int layer, bool key);  // present.N.key / .value
}  // namespace names

void build_graph(const Model& model, GraphKind kind, const GraphSettings& settings, WeightFile& weights,
                 onnx::ModelProto& out);

}  // namespace splitdec::onnx_export
