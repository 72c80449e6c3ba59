// The decoder's input rows for a prompt batch: what the runtime feeds to
// Model::run_layers (and the oracle too).
#pragma once

#include <vector>

#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

// Input embeddings [rows, hidden]: token embeddings (scaled, Model::embed),
// with media rows spliced in unscaled, in order, at the non-text positions.
// The rows come from prompt.media, or, when `sequence_media` is given, from
// where the caller holds them: sequence b's rows, in order, start at
// sequence_media[b] (a session's chunk reads its segment's rows in place).
std::vector<float> embed_prompt(const Model& model, const PromptBatch& prompt, const float* const* sequence_media = nullptr);

// The per-layer inputs of the prompt's rows (Model::per_layer_inputs; media
// rows read the pad token's table row), from `hidden` = embed_prompt's rows.
// Empty for a model without per-layer embeddings.
std::vector<float> embed_per_layer(const Model& model, const PromptBatch& prompt, const std::vector<float>& hidden,
                                   bool rows_independent = false, const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
