// The files ONNX Runtime GenAI reads beside a package's graphs, other than
// genai_config.json: the tokenizer (its tokenizer.json and
// tokenizer_config.json, copied from the model folder) and, for its
// multimodal route, the image processor's config (processor_config.json,
// onnxruntime-extensions' transform list). Facts from GenAI a0c04eb13 and
// onnxruntime-extensions (docs/onnx-export.md, "GenAI's multimodal route").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "media/frontend_config.h"

namespace splitdec::onnx_export {

struct ExportFrontends;

inline constexpr const char* kGenaiProcessorFile = "processor_config.json";

// The tokenizer files of `model_dir` that GenAI's tokenizer reads
// (tokenizer.json, tokenizer_config.json, and a chat template file if the
// checkpoint keeps it apart), copied into `out_dir` where present; returns
// the names copied.
std::vector<std::string> copy_tokenizer_files(const std::string& model_dir, const std::string& out_dir);
// The names copy_tokenizer_files may write (a reused package folder loses them first).
std::vector<std::string> tokenizer_file_names();
// InputError naming the missing file when `model_dir` lacks tokenizer.json
// or tokenizer_config.json (GenAI creates no tokenizer without both).
void require_tokenizer_files(const std::string& model_dir);
// The texts of the image tokens (begin, soft token, end) that GenAI's
// processor writes and finds.
struct ImageTokenStrings {
  const char *begin, *soft, *end;
};
// What GenAI's multimodal route is for a vision frontend: the model type
// that picks its processor and that processor's image token texts. Gemma-3
// (SigLIP): gemma3, <start_of_image> <image_soft_token> <end_of_image>;
// Gemma-4's encoder: gemma4, <|image> <|image|> <image|>. ConfigError for a
// frontend the route does not take (check_genai_route names why first).
struct GenaiImageFamily {
  const char* model_type;
  ImageTokenStrings tokens;
};
GenaiImageFamily genai_image_family(VisionFrontend vision);
// InputError naming the token when tokenizer.json's added tokens lack one of
// `strings` or give it another id than config.json (GenAI looks them up by text).
void require_image_token_strings(const std::string& model_dir, const ImageTokenStrings& strings, int boi, int image, int eoi);

// processor_config.json (onnxruntime-extensions' transform list) for the
// vision graph of GenAI's multimodal route (a frontend genai_image_family
// takes):
// - Gemma-3 (SigLIP): decode to RGB, stretch to image_size with PIL's
//   BILINEAR (what Hugging Face's Gemma3ImageProcessor and splitdec use),
//   x / 255, (x - 0.5) / 0.5, channels first: pixel_values [images, 3, S, S];
// - Gemma-4 encoder: decode to RGB, Gemma4ImageTransform (aspect-preserving
//   resize to the soft-token budget, 16 px patches, positions with (-1, -1)
//   padding): pixel_values [images, patches, 768] + positions. Its resize is
//   torchvision's float bicubic (HF's fast processor); splitdec's is PIL's
//   uint8 bicubic (HF's slow processor), so pixels of a resized image differ
//   by about 1/255; an image already at its target size passes unchanged in both.
nlohmann::json image_processor_config(const ExportFrontends& frontends);

}  // namespace splitdec::onnx_export
