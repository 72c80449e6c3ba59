// `splitdec export-onnx`: writes a model as an ONNX Runtime GenAI style
// package. The `split` package is a decoder pipeline of two graphs over one
// set of KV buffers [batch, kv_heads, max_length, head_dim]: a prefill graph
// (ONNX Attention with the policy's mask; new K/V written in place with
// TensorScatter) and a decode graph (com.microsoft.GroupQueryAttention, no
// mask, no bias). The `single` package is today's static export: one graph,
// Attention with a dense float bias every step, separate past and present.
// Both share an embedding graph; all graphs read one external weights file.
// A checkpoint with media frontends adds their graphs (vision.onnx,
// speech.onnx; see media_graphs.h), which read the same file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "mask/mask_contract.h"

namespace splitdec {

class Model;
namespace onnx_export {
struct ExportFrontends;
}

// What a package holds: `split` (a prefill graph and a decode graph on
// shared KV buffers) or `single` (one graph with a dense bias, every step).
enum class OnnxPackageKind { Split, Single };
// "split" | "single"; InputError naming the plan otherwise (the other plans cannot be exported).
OnnxPackageKind parse_package_kind(const std::string& plan);
const char* package_kind_name(OnnxPackageKind k);

// How ONNX Runtime GenAI runs the package. `pipeline`: a decoder-pipeline
// model (embedding stages, then the decoder graphs); the caller binds the
// media rows (media_embeds). `multimodal`: GenAI's own route for the family
// (model type gemma3 or gemma4): its processor turns a prompt and images
// into ids and pixels, vision.onnx makes the rows. Stock GenAI runs the
// single package so (the embedding graph on every run, one decoder); the
// split package needs the GemmaPipelineModel of contrib/onnxruntime-genai.
// Written for Gemma-3 with 256 image tokens and for Gemma-4's vision
// encoder (docs/onnx-export.md says why).
enum class GenaiRoute { Pipeline, Multimodal };
// "pipeline" | "multimodal"; InputError otherwise.
GenaiRoute parse_genai_route(const std::string& name);
const char* genai_route_name(GenaiRoute r);

struct OnnxExportOptions {
  int64_t max_length = 4096;         // KV buffer length (split); context length (both)
  std::optional<MaskPolicy> policy;  // default: the model family's
  OnnxPackageKind plan = OnnxPackageKind::Split;
  GenaiRoute genai_route = GenaiRoute::Pipeline;
  // The model folder: its tokenizer files go into the package (required by
  // the multimodal route, copied when present otherwise).
  std::string model_dir;
};

struct OnnxPackage {
  std::vector<std::string> files;  // written, relative to the package directory
  int64_t weight_bytes = 0;
};

// The package file names.
inline constexpr const char* kOnnxWeightsFile = "model.onnx.data";
inline constexpr const char* kOnnxEmbeddingFile = "embedding.onnx";             // prompt runs: text and media rows
inline constexpr const char* kOnnxTokenEmbeddingFile = "token_embedding.onnx";  // generation runs: every id is text
inline constexpr const char* kOnnxPrefillFile = "decoder_prefill.onnx";
inline constexpr const char* kOnnxDecodeFile = "decoder_decode.onnx";
inline constexpr const char* kOnnxSingleFile = "decoder.onnx";
inline constexpr const char* kGenaiConfigFile = "genai_config.json";  // ONNX Runtime GenAI's keys only
inline constexpr const char* kSplitdecConfigFile = "splitdec.json";    // plan, policy, KV layout, media rules

// Throws InputError naming the feature and the reason when the options
// cannot be expressed with the operators the package uses.
void check_onnx_export_options(const OnnxExportOptions& options);
// ConfigError naming the feature a model has that the export cannot write
// (experts).
void check_onnx_exportable(const ModelConfig& config);
// InputError naming what the multimodal route needs and the model lacks (a
// Gemma-3 SigLIP tower with its weights, 256 tokens an image, the
// tokenizer's files with the image tokens of `config`); nothing for the
// pipeline route. export_onnx_package calls it.
void check_genai_route(const OnnxExportOptions& options, const ModelConfig& config,
                       const onnx_export::ExportFrontends* frontends);

// `frontends` (when given and holding weights) adds the vision / speech
// graphs and their genai_config.json sections; without it, or for a
// checkpoint without frontend weights, the package has the text graphs only.
OnnxPackage export_onnx_package(const Model& model, const std::string& out_dir, const OnnxExportOptions& options,
                                const onnx_export::ExportFrontends* frontends = nullptr);

}  // namespace splitdec
