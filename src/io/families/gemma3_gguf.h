// A Gemma-3 text model in a GGUF file as llama.cpp's converter
// (convert_hf_to_gguf.py, class Gemma3Model) writes it and its loader reads
// it: the `gemma3.*` metadata as the Hugging Face config it came from, and
// llama.cpp's tensor names as the checkpoint names the loader knows. What
// the converter changes is undone here or in the config: norms are stored
// as 1 + w (ModelConfig::norm_adds_one is false for them, so they are used
// as stored), and the embedding scale stays f32 as llama.cpp computes it.
// The tensor names are in gguf_model.h; the keys and tensors read are
// listed in docs/gguf.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>


namespace splitdec {

class GgufFile;
struct ModelConfig;

// The Hugging Face config.json (model_type gemma3_text) that the file's
// metadata stands for. ConfigError naming the key for a missing, mistyped or
// out-of-range value, or an architecture other than gemma3.
nlohmann::json gemma3_config_from_gguf(const GgufFile& file);
// The decoder's config: the above, parsed, with the GGUF conventions set.
ModelConfig gemma3_model_config_from_gguf(const GgufFile& file);

}  // namespace splitdec
