#include "io/model_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/families/family.h"
#include "io/gguf.h"
#include "io/families/gguf_model.h"
#include "io/families/mmproj.h"

namespace splitdec {

using nlohmann::json;

ModelConfig parse_model_config(const json& root, const std::string& source) {
  if (!root.is_object()) throw ConfigError(source + ": not a JSON object");
  ConfigFields top(root, source);
  ModelConfig c;
  c.model_type = top.string("model_type", "");
  if (c.model_type.empty()) top.fail("model_type", "is missing");
  bool multimodal = false;
  const ModelFamily* family = find_model_family(c.model_type, &multimodal);
  if (family == nullptr)
    top.fail("model_type", "value '" + c.model_type + "' is not supported (" + supported_model_types() + " are)");
  c.family = family->family;

  // A multimodal config nests the decoder's fields in text_config; absent, every one takes its default.
  const json empty = json::object();
  const json* text_json = &root;
  std::string text_where = source;
  if (multimodal) {
    if (root.contains("text_config") && !root["text_config"].is_null()) {
      if (!root["text_config"].is_object()) top.fail("text_config", "must be an object");
      text_json = &root["text_config"];
      text_where = source + " (text_config)";
    } else {
      text_json = &empty;
    }
  }
  const ConfigFields text(*text_json, text_where);
  family->parse({top, text, c.model_type, multimodal}, c);
  return c;
}

void check_mmproj_pairing(const std::string& model_dir, const std::string& mmproj) {
  if (!is_gguf_path(model_dir))
    throw ConfigError("--mmproj " + mmproj + " pairs with a GGUF text model (--model FILE.gguf); " + model_dir +
                      " is not one (a model folder brings its own vision tower)");
  std::error_code ec;
  if (!std::filesystem::exists(mmproj, ec)) throw ConfigError("--mmproj " + mmproj + ": no such file");
  if (!std::filesystem::is_regular_file(mmproj, ec)) throw ConfigError("--mmproj " + mmproj + ": not a file (an mmproj GGUF is one)");
  if (!is_gguf_path(mmproj)) throw ConfigError("--mmproj " + mmproj + ": not a GGUF file (FILE.gguf)");
}

ModelConfig load_model_config(const std::string& model_dir, const std::string& mmproj) {
  if (!mmproj.empty()) {
    check_mmproj_pairing(model_dir, mmproj);
    return model_config_from_gguf_pair(*GgufFile::open(model_dir), *GgufFile::open(mmproj));
  }
  // Say what a model is when the path is something else (a GGUF file, a
  // typo), rather than "DIR/config.json: cannot open".
  if (is_gguf_path(model_dir)) return model_config_from_gguf(*GgufFile::open(model_dir));
  std::error_code ec;
  const auto status = std::filesystem::status(model_dir, ec);
  const std::string expected =
      "a model is a Hugging Face folder (config.json, *.safetensors, tokenizer.json or tokenizer.model), "
      "as make-model, quantize and Hugging Face write them, or a Gemma-3 / Gemma-4 GGUF file (FILE.gguf)";
  if (!std::filesystem::exists(status)) throw ConfigError(model_dir + ": no such folder or file; " + expected);
  if (!std::filesystem::is_directory(status)) throw ConfigError(model_dir + ": a file, not a folder; " + expected);
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open; " + expected);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
  return parse_model_config(j, path);
}

}  // namespace splitdec
