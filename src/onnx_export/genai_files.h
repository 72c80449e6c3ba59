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
// GenAI's Gemma-3 processor finds the image tokens by their text
// (<start_of_image>, <image_soft_token>, <end_of_image>): InputError naming
// the token when tokenizer.json's added tokens lack one or give it another
// id than config.json.
void require_image_token_strings(const std::string& model_dir, int boi, int image, int eoi);

// processor_config.json for the Gemma-3 (SigLIP) vision graph: decode to
// RGB, stretch to image_size with PIL's BILINEAR (what Hugging Face's
// Gemma3ImageProcessor and splitdec use), x / 255, (x - 0.5) / 0.5,
// channels first: pixel_values [images, 3, S, S] as vision.onnx takes them.
nlohmann::json siglip_processor_config(const ExportFrontends& frontends);

}  // namespace splitdec::onnx_export
