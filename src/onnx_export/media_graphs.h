// The media frontends as ONNX graphs of an exported package (FRONTENDS.md
// sections 1.3, 2.3, 3.3, transcribed from the same math as src/media/'s
// towers, which the ONNX Runtime tests hold them to):
//
//   vision.onnx, by the checkpoint's vision frontend:
//     gemma4_unified  pixel_values [num_patches, 3*48*48] (48 px patches,
//                     (row, col, c) order, x / 255) + image_position_ids
//                     [num_patches, 2] int64 ((x, y) on the 48 px grid, (-1, -1)
//                     for padding) -> image_features [num_patches, text_hidden]
//     Gemma-3 SigLIP  pixel_values [num_images, 3, S, S] (HF's processor
//                     output, normalized) -> image_features [num_images,
//                     tokens, text_hidden]
//     Gemma-4 encoder pixel_values [num_patches, 3*16*16] ((y, x, c) order,
//                     x / 255) + image_position_ids [num_patches, 2] (16 px
//                     grid, (-1, -1) for padding) -> image_features
//                     [num_soft_tokens, text_hidden], one row per pooled bin;
//                     stacked (GenAI's route): the same with a leading
//                     num_images axis on all three
//   speech.onnx (gemma4_unified): audio_frames [num_frames, 640] (cut and
//                     zero-padded) -> audio_features [num_frames, text_hidden]
//
// Weights go into the package's shared weights file under "vision." /
// "speech." names.
#pragma once

#include <string>

#include "media/frontend_config.h"
#include "media/frontend_weights.h"

namespace onnx {
class ModelProto;
}

namespace splitdec {
struct ModelConfig;
}

namespace splitdec::onnx_export {

class WeightFile;

inline constexpr const char* kOnnxVisionFile = "vision.onnx";
inline constexpr const char* kOnnxSpeechFile = "speech.onnx";

// Graph input/output names.
namespace media_names {
inline constexpr const char* kPixelValues = "pixel_values";
inline constexpr const char* kImagePositionIds = "image_position_ids";
inline constexpr const char* kImageFeatures = "image_features";
inline constexpr const char* kAudioFrames = "audio_frames";
inline constexpr const char* kAudioFeatures = "audio_features";
}  // namespace media_names

// A checkpoint's frontends as the exporter reads them: the config, and the
// weights when the checkpoint has them (a decoder-only checkpoint of a
// multimodal model has none: then no media graph is written).
struct ExportFrontends {
  FrontendConfig config;
  FrontendWeights weights;
  bool weights_loaded = false;

  bool has_vision() const { return weights_loaded && config.vision != VisionFrontend::None; }
  // Only gemma4_unified's raw-frame embedder has a speech graph; Gemma-4
  // E2B/E4B's conformer tower is not exported (the text and vision graphs are).
  bool has_audio() const { return weights_loaded && config.audio == AudioFrontend::RawFrames; }
};

// config.json (+ preprocessor config) and the checkpoint of `model_dir`
// through load_frontend_config / load_frontend_weights.
ExportFrontends load_export_frontends(const std::string& model_dir, const ModelConfig& decoder);

// How vision.onnx takes Gemma-4 images: one per run (the pipeline packages,
// as splitdec's frontend cuts them), or stacked as ONNX Runtime GenAI's
// Gemma-4 processor makes them (pixel_values [images, patches, 768],
// image_position_ids [images, patches, 2] -> image_features [images,
// tokens, hidden]). SigLIP's graph is stacked either way; gemma4_unified's
// has only the one-image form.
enum class VisionImages { OnePerRun, Stacked };

// Whether the vision graph takes image_position_ids (the Gemma-4 families).
bool vision_graph_takes_positions(const FrontendConfig& config);
// What the vision graph's pixel_values hold, in words (for genai_config's splitdec section).
std::string vision_graph_layout(const FrontendConfig& config, VisionImages images);

// Require has_vision() / has_audio().
void build_vision_graph(const ExportFrontends& frontends, VisionImages images, WeightFile& weights, onnx::ModelProto& out);
void build_speech_graph(const ExportFrontends& frontends, WeightFile& weights, onnx::ModelProto& out);

}  // namespace splitdec::onnx_export
