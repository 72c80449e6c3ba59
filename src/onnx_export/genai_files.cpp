#include "onnx_export/genai_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "onnx_export/media_graphs.h"

namespace splitdec::onnx_export {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// GenAI's tokenizer (onnxruntime-extensions) needs tokenizer_config.json and
// tokenizer.json; it takes the chat template from tokenizer_config.json or,
// failing that, chat_template.jinja / chat_template.json.
constexpr const char* kRequired[] = {"tokenizer.json", "tokenizer_config.json"};
constexpr const char* kOptional[] = {"chat_template.jinja", "chat_template.json"};
}  // namespace

std::vector<std::string> tokenizer_file_names() {
  std::vector<std::string> names(std::begin(kRequired), std::end(kRequired));
  names.insert(names.end(), std::begin(kOptional), std::end(kOptional));
  return names;
}

void require_tokenizer_files(const std::string& model_dir) {
  for (const char* name : kRequired)
    if (model_dir.empty() || !fs::is_regular_file(fs::path(model_dir) / name))
      throw InputError("the package needs the model folder's " + std::string(name) +
                       " (ONNX Runtime GenAI's tokenizer reads it); '" + model_dir + "' has none");
}

GenaiImageFamily genai_image_family(VisionFrontend vision) {
  if (vision == VisionFrontend::Siglip) return {"gemma3", {"<start_of_image>", "<image_soft_token>", "<end_of_image>"}};
  if (vision == VisionFrontend::Gemma4Encoder) return {"gemma4", {"<|image>", "<|image|>", "<image|>"}};
  throw ConfigError("GenAI's multimodal route has no processor for this vision frontend");
}

void require_image_token_strings(const std::string& model_dir, const ImageTokenStrings& strings, int boi, int image, int eoi) {
  const fs::path file = fs::path(model_dir) / "tokenizer.json";
  std::ifstream in(file);
  json tok;
  try {
    tok = json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(file.string() + ": not a tokenizer.json (" + e.what() + ")");
  }
  const json& added = tok.contains("added_tokens") ? tok["added_tokens"] : json::array();
  for (const auto& [text, id] : {std::pair{strings.begin, boi}, {strings.soft, image}, {strings.end, eoi}}) {
    int found = -1;
    for (const json& t : added)
      if (t.is_object() && t.value("content", "") == text && t.contains("id") && t["id"].is_number_integer())
        found = t["id"].get<int>();
    if (found != id)
      throw InputError(file.string() + ": GenAI's processor writes each image as " + text + " tokens, found by text; " +
                       (found < 0 ? std::string("the tokenizer has no such added token")
                                  : "it is id " + std::to_string(found)) +
                       ", config.json's is " + std::to_string(id));
  }
}

std::vector<std::string> copy_tokenizer_files(const std::string& model_dir, const std::string& out_dir) {
  std::vector<std::string> copied;
  if (model_dir.empty() || !fs::is_directory(model_dir)) return copied;  // a GGUF file: its tokenizer is inside
  for (const std::string& name : tokenizer_file_names()) {
    const fs::path from = fs::path(model_dir) / name;
    if (!fs::is_regular_file(from)) continue;
    std::error_code ec;
    fs::copy_file(from, fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw InputError("cannot copy " + from.string() + " into " + out_dir + ": " + ec.message());
    copied.push_back(name);
  }
  return copied;
}

json image_processor_config(const ExportFrontends& f) {
  auto op = [](const char* name, const char* type, json attrs) {
    return json{{"operation", {{"name", name}, {"type", type}, {"attrs", std::move(attrs)}}}};
  };
  if (f.config.vision == VisionFrontend::Gemma4Encoder)
    return {{"processor",
             {{"name", "gemma_4_image_processing"},
              {"transforms",
               {op("decode_image", "DecodeImage", {{"color_space", "RGB"}}),
                op("gemma4_image_transform", "Gemma4ImageTransform",
                   {{"patch_size", f.config.gemma4_patch},
                    {"max_soft_tokens", f.config.default_image_tokens},
                    {"pooling_kernel_size", f.config.gemma4_pool}})}}}}};
  const int size = f.config.siglip.image_size;
  return {{"processor",
           {{"name", "gemma_3_image_processing"},
            {"transforms",
             {op("decode_image", "DecodeImage", {{"color_space", "RGB"}}),
              op("resize", "Resize",
                 {{"interpolation", "LINEAR"}, {"width", size}, {"height", size}, {"keep_aspect_ratio", 0}}),
              op("re-scale", "Rescale", {{"rescale_factor", 1.0 / 255.0}}),
              op("normalize", "Normalize", {{"mean", {0.5, 0.5, 0.5}}, {"std", {0.5, 0.5, 0.5}}}),
              op("to_channel_first", "Permute3D", {{"dims", {2, 0, 1}}})}}}}};
}

}  // namespace splitdec::onnx_export
