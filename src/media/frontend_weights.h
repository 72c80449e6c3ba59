// The media frontends' weights: one list of checkpoint tensors per tower
// (name, accepted aliases, shape, where it goes), which both the loader and
// make-model walk, so that the two agree on names and shapes.
//
// Names are the ones Google's checkpoints and Hugging Face's converters
// write; where Hugging Face's module paths differ (gemma4_unified's
// model.embed_vision.*; Gemma-3's unprefixed vision_tower.* of the first
// releases) they are accepted as aliases.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "media/frontend_config.h"

namespace splitdec {

class TensorStore;

struct FrontendWeights {
  SiglipWeights siglip;
  Gemma4VisionWeights gemma4;
  UnifiedVisionWeights unified;
  WeightMatrix audio_projection;  // [text_hidden, frame]
  ConformerAudioWeights conformer;
};

struct FrontendTensor {
  std::string name;                  // as written by make-model
  std::vector<std::string> aliases;  // other names accepted when loading
  std::vector<int64_t> shape;        // as stored in the checkpoint
  // How it is stored and what make-model fills it with.
  enum Kind {
    Matrix,            // [out, in...] nn.Linear / conv layout; trailing dims flatten into `in`
    TransposedMatrix,  // [in, out], used as x @ W: loaded transposed
    Bias,              // small values around 0
    Gain,              // a norm weight used directly: values around 1
    GainMinusOne,      // a Gemma (1 + w) norm weight: values around 0
    Table,             // position embeddings
    ClipLow,           // a clipped linear's lower bound (a scalar)
    ClipHigh,
  } kind;
  WeightMatrix* matrix = nullptr;   // Matrix, TransposedMatrix
  std::vector<float>* values = nullptr;  // Bias, Gain, GainMinusOne, Table
  float* scalar = nullptr;          // ClipLow, ClipHigh
};

// Every tensor of the configured frontends, pointing into `weights`
// (Gemma-4 clip bounds are created in `weights` when the config asks for them).
std::vector<FrontendTensor> frontend_tensors(const FrontendConfig& config, FrontendWeights& weights);

// Fills `weights` from `store`; a missing tensor or a wrong shape is a
// FormatError naming the tensor, the shape found and the one expected.
// Returns false (and loads nothing) when the checkpoint has none of the
// frontend's tensors at all: a decoder-only export of a multimodal model.
// `bytes` (when given) grows by the bytes held in memory.
bool load_frontend_weights(const FrontendConfig& config, const TensorStore& store, FrontendWeights& weights,
                           size_t* bytes = nullptr);

}  // namespace splitdec
