#include "model/prompt_batch.h"

#include <algorithm>

#include "core/error.h"
#include "io/model_config.h"

namespace splitdec {

int64_t PromptBatch::media_positions() const {
  int64_t n = 0;
  for (Modality m : modality) n += m != Modality::Text;
  return n;
}

std::vector<int> PromptBatch::sequence_block_ids(int b) const {
  const auto first = size_t(b) * size_t(seq);
  if (!block_ids.empty()) return {block_ids.begin() + long(first), block_ids.begin() + long(first + size_t(seq))};
  return block_ids_from_modality({modality.begin() + long(first), modality.begin() + long(first + size_t(seq))});
}

std::vector<int64_t> PromptBatch::rope_positions() const {
  std::vector<int64_t> pos(static_cast<size_t>(rows()));
  for (int b = 0; b < batch; ++b) {
    int64_t next = 0;
    for (int s = 0; s < seq; ++s) {
      const size_t r = size_t(b) * size_t(seq) + size_t(s);
      pos[r] = attention_mask[r] ? next++ : 0;
    }
  }
  return pos;
}

std::pair<int64_t, int64_t> PromptBatch::sequence_media_rows(int b) const {
  int64_t first = 0, count = 0;
  for (int64_t r = 0; r < rows(); ++r) {
    if (modality[size_t(r)] == Modality::Text) continue;
    if (r / seq < b) ++first;
    else if (r / seq == b) ++count;
  }
  return {first, count};
}

PromptBatch PromptBatch::concat(const PromptBatch& tail) const {
  if (tail.batch != batch) throw InputError("cannot join batches of " + std::to_string(batch) + " and " + std::to_string(tail.batch) + " sequences");
  if (media.empty() != tail.media.empty() && media_positions() > 0 && tail.media_positions() > 0)
    throw InputError("either every segment with media gives media embeddings or none does");
  PromptBatch out;
  out.batch = batch;
  out.seq = seq + tail.seq;
  const int64_t H = media.empty() ? (tail.media.empty() ? 0 : int64_t(tail.media.size()) / std::max<int64_t>(1, tail.media_positions()))
                                  : int64_t(media.size()) / std::max<int64_t>(1, media_positions());
  for (int b = 0; b < batch; ++b) {
    for (const PromptBatch* part : {this, &tail}) {
      const size_t first = size_t(b) * size_t(part->seq), last = first + size_t(part->seq);
      out.tokens.insert(out.tokens.end(), part->tokens.begin() + long(first), part->tokens.begin() + long(last));
      out.modality.insert(out.modality.end(), part->modality.begin() + long(first), part->modality.begin() + long(last));
      out.attention_mask.insert(out.attention_mask.end(), part->attention_mask.begin() + long(first),
                                part->attention_mask.begin() + long(last));
      // Blocks are derived per segment, so the joined batch carries explicit
      // ids: an image ending one segment and one starting the next stay two
      // blocks. The tail's ids are shifted past this part's.
      const std::vector<int> ids = part->sequence_block_ids(b);
      int offset = 0;
      if (part == &tail)
        for (int id : sequence_block_ids(b)) offset = std::max(offset, id + 1);
      for (int id : ids) out.block_ids.push_back(id < 0 ? -1 : id + offset);
      if (!part->media.empty()) {
        const auto [row, count] = part->sequence_media_rows(b);
        out.media.insert(out.media.end(), part->media.begin() + long(row * H), part->media.begin() + long((row + count) * H));
      }
    }
  }
  return out;
}

PromptBatch PromptBatch::select(const std::vector<int>& rows) const {
  PromptBatch out;
  out.batch = int(rows.size());
  out.seq = seq;
  const int64_t H = media.empty() ? 0 : int64_t(media.size()) / std::max<int64_t>(1, media_positions());
  for (int b : rows) {
    if (b < 0 || b >= batch) throw InputError("no sequence " + std::to_string(b) + " in a batch of " + std::to_string(batch));
    const long first = long(b) * seq, last = first + seq;
    out.tokens.insert(out.tokens.end(), tokens.begin() + first, tokens.begin() + last);
    out.modality.insert(out.modality.end(), modality.begin() + first, modality.begin() + last);
    out.attention_mask.insert(out.attention_mask.end(), attention_mask.begin() + first, attention_mask.begin() + last);
    if (!block_ids.empty()) out.block_ids.insert(out.block_ids.end(), block_ids.begin() + first, block_ids.begin() + last);
    if (!media.empty()) {
      const auto [row, count] = sequence_media_rows(b);
      out.media.insert(out.media.end(), media.begin() + long(row * H), media.begin() + long((row + count) * H));
    }
  }
  return out;
}

PromptBatch PromptBatch::slice(int begin, int end) const {
  if (begin < 0 || end > seq || begin >= end)
    throw InputError("positions [" + std::to_string(begin) + ", " + std::to_string(end) + ") are not a part of a " +
                     std::to_string(seq) + "-position prompt");
  if (begin == 0 && end == seq) return *this;
  PromptBatch out;
  out.batch = batch;
  out.seq = end - begin;
  const int64_t H = media.empty() ? 0 : int64_t(media.size()) / std::max<int64_t>(1, media_positions());
  int64_t media_row = 0;  // media rows are batch-major: count the non-text positions before each part
  for (int b = 0; b < batch; ++b) {
    const long row = long(b) * seq, first = row + begin, last = row + end;
    auto non_text = [&](long from, long to) {
      return int64_t(std::count_if(modality.begin() + from, modality.begin() + to, [](Modality m) { return m != Modality::Text; }));
    };
    media_row += non_text(row, first);
    out.tokens.insert(out.tokens.end(), tokens.begin() + first, tokens.begin() + last);
    out.modality.insert(out.modality.end(), modality.begin() + first, modality.begin() + last);
    out.attention_mask.insert(out.attention_mask.end(), attention_mask.begin() + first, attention_mask.begin() + last);
    if (!block_ids.empty()) out.block_ids.insert(out.block_ids.end(), block_ids.begin() + first, block_ids.begin() + last);
    const int64_t inside = non_text(first, last);
    if (H > 0) out.media.insert(out.media.end(), media.begin() + long(media_row * H), media.begin() + long((media_row + inside) * H));
    media_row += inside + non_text(last, row + seq);
  }
  return out;
}

PromptBatch PromptBatch::text_column(const std::vector<int>& tokens) {
  PromptBatch p;
  p.batch = int(tokens.size());
  p.seq = 1;
  p.tokens = tokens;
  p.modality.assign(tokens.size(), Modality::Text);
  p.attention_mask.assign(tokens.size(), 1);
  return p;
}

void validate_prompt_batch(const PromptBatch& p, const ModelConfig& c) {
  if (p.batch <= 0 || p.seq <= 0) throw InputError("input: the batch is empty (need at least one sequence of one token)");
  const size_t n = size_t(p.rows());
  if (p.tokens.size() != n || p.modality.size() != n || p.attention_mask.size() != n)
    throw InputError("input: tokens, modality and attention_mask must each hold batch x seq = " + std::to_string(n) +
                     " entries");
  if (!p.block_ids.empty() && p.block_ids.size() != n)
    throw InputError("input: block_ids must hold batch x seq = " + std::to_string(n) + " entries");
  for (size_t r = 0; r < n; ++r) {
    const std::string where = "sequence " + std::to_string(r / size_t(p.seq)) + " position " + std::to_string(r % size_t(p.seq));
    if (p.tokens[r] < 0 || p.tokens[r] >= c.vocab_size)
      throw InputError("input: token id " + std::to_string(p.tokens[r]) + " at " + where + " is outside the vocabulary [0, " +
                       std::to_string(c.vocab_size) + ")");
    if (p.attention_mask[r] > 1) throw InputError("input: attention_mask at " + where + " must be 0 or 1");
    if (!p.attention_mask[r] && p.modality[r] != Modality::Text)
      throw InputError("input: padding at " + where + " must be a text token");
  }
  if (!p.block_ids.empty())
    for (int b = 0; b < p.batch; ++b) validate_block_ids(p.sequence_block_ids(b));
  if (!p.media.empty()) {
    const int64_t want = p.media_positions();
    if (int64_t(p.media.size()) % c.hidden_size != 0)
      throw InputError("input: media embeddings are not a whole number of rows of hidden_size " + std::to_string(c.hidden_size));
    const int64_t have = int64_t(p.media.size()) / c.hidden_size;
    if (have != want)
      throw InputError("input: " + std::to_string(have) + " media embedding rows given but the batch has " +
                       std::to_string(want) + " non-text positions");
  }
}

}  // namespace splitdec
