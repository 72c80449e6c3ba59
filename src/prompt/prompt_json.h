// Exact inputs from a JSON file (`splitdec generate --input`): token ids,
// modality, padding, block ids and media rows, one turn or several.
#pragma once

#include <string>
#include <vector>

#include "model/prompt_batch.h"

namespace splitdec {

struct ModelConfig;

// {"tokens": [[ids...], ...], "modality": [["text"|"image"|"video"|"audio", ...], ...],
//  "attention_mask": [[1, 0, ...], ...], "block_ids": [[...]], "media_embeddings": "file.npy"}
// attention_mask, block_ids and media_embeddings are optional; the .npy path
// is relative to the JSON file's folder unless absolute. Every sequence must
// have the same length (pad explicitly). Errors are InputErrors naming the key.
PromptBatch read_prompt_json(const std::string& path, const ModelConfig& config);

// A single-turn file as above (one turn of `default_max_new_tokens`), or
// {"turns": [turn, ...]} where each turn has the single-turn form plus its
// own "max_new_tokens".
std::vector<Turn> read_turns_json(const std::string& path, const ModelConfig& config, int default_max_new_tokens);

}  // namespace splitdec
