// Test prompts built token by token: text, media runs wrapped in their
// markers with random media rows, and left-padded batches of them.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <random>
#include <vector>

#include "io/model_config.h"
#include "model/prompt_batch.h"

namespace splitdec::test {

// Builds one sequence: text, media runs wrapped in their markers, with
// random media rows.
class SeqBuilder {
 public:
  SeqBuilder(const ModelConfig& c, uint32_t seed) : c_(c), rng_(seed) { push(c.bos_token_id, Modality::Text); }
  SeqBuilder& text(int n) {
    for (int k = 0; k < n; ++k) push(20 + int(rng_() % uint32_t(c_.vocab_size - 20)), Modality::Text);
    return *this;
  }
  SeqBuilder& media(Modality m, int n) { return media_runs({{m, n}}); }
  // Media runs back to back inside one pair of markers (an image run
  // directly followed by a video run is one vision block).
  SeqBuilder& media_runs(std::initializer_list<std::pair<Modality, int>> runs) {
    const bool audio = runs.begin()->first == Modality::Audio;
    // Models without audio/video tokens (Gemma-3) still take the modality
    // through exact inputs; stand-in ids are used then.
    auto or_any = [](int id) { return id >= 0 ? id : 30; };
    push(or_any(audio ? c_.boa_token_id : c_.boi_token_id), Modality::Text);
    std::uniform_real_distribution<float> u(-1.7f, 1.7f);
    for (const auto& [m, n] : runs) {
      const int id = or_any(m == Modality::Image ? c_.image_token_id : m == Modality::Video ? c_.video_token_id : c_.audio_token_id);
      for (int k = 0; k < n; ++k) {
        push(id, m);
        for (int d = 0; d < c_.hidden_size; ++d) media_.push_back(u(rng_));
      }
    }
    push(or_any(audio ? c_.eoa_token_id : c_.eoi_token_id), Modality::Text);
    return *this;
  }
  SeqBuilder& no_bos() {
    tokens_.erase(tokens_.begin());
    modality_.erase(modality_.begin());
    return *this;
  }
  std::vector<int> tokens_;
  std::vector<Modality> modality_;
  std::vector<float> media_;

 private:
  void push(int t, Modality m) { tokens_.push_back(t), modality_.push_back(m); }
  const ModelConfig& c_;
  std::mt19937 rng_;
};

// Left-pads the sequences to one length.
inline PromptBatch batch_of(const std::vector<SeqBuilder>& seqs, int pad_id) {
  PromptBatch p;
  p.batch = int(seqs.size());
  for (const auto& s : seqs) p.seq = std::max(p.seq, int(s.tokens_.size()));
  for (const auto& s : seqs) {
    const int pad = p.seq - int(s.tokens_.size());
    for (int k = 0; k < pad; ++k) p.tokens.push_back(pad_id), p.modality.push_back(Modality::Text), p.attention_mask.push_back(0);
    p.tokens.insert(p.tokens.end(), s.tokens_.begin(), s.tokens_.end());
    p.modality.insert(p.modality.end(), s.modality_.begin(), s.modality_.end());
    p.attention_mask.insert(p.attention_mask.end(), s.tokens_.size(), 1);
    p.media.insert(p.media.end(), s.media_.begin(), s.media_.end());
  }
  return p;
}

}  // namespace splitdec::test
