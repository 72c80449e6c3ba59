// A batch of token sequences with everything the mask and the embedding step
// need: modality per token, padding, optional explicit block ids and the
// media embeddings spliced in at non-text positions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "mask/mask_contract.h"

namespace splitdec {

struct ModelConfig;

struct PromptBatch {
  int batch = 0;
  int seq = 0;
  std::vector<int> tokens;              // [batch * seq]
  std::vector<Modality> modality;       // [batch * seq]
  std::vector<uint8_t> attention_mask;  // [batch * seq]; 0 = padding
  std::vector<int> block_ids;           // [batch * seq] explicit, or empty: derived from modality
  // Rows [n, hidden] spliced in order at the non-text positions, batch-major.
  // Empty: those positions use their token embedding.
  std::vector<float> media;

  int64_t rows() const { return int64_t(batch) * seq; }
  int64_t media_positions() const;
  // Block ids of sequence b (explicit or derived).
  std::vector<int> sequence_block_ids(int b) const;
  // RoPE positions: real tokens count 0, 1, 2, ... in order; pads take 0.
  std::vector<int64_t> rope_positions() const;
  // Media rows of sequence b: [first, first + count) rows of `media`.
  std::pair<int64_t, int64_t> sequence_media_rows(int b) const;
  // Sequences b of this batch and of `tail` joined end to end (media rows regrouped per sequence).
  PromptBatch concat(const PromptBatch& tail) const;
  // Sequences `rows` of this batch, in that order (their media rows with them).
  PromptBatch select(const std::vector<int>& rows) const;
  // Positions [begin, end) of every sequence (their media rows with them).
  PromptBatch slice(int begin, int end) const;
  // One text token per sequence (a decode step, or a pending token).
  static PromptBatch text_column(const std::vector<int>& tokens);
};

// One turn of a conversation: a prompt appended after everything so far,
// then up to max_new_tokens generated tokens.
struct Turn {
  PromptBatch prompt;
  int max_new_tokens = 16;
};

// Throws InputError naming the sequence, position and limit.
void validate_prompt_batch(const PromptBatch& p, const ModelConfig& config);

}  // namespace splitdec
