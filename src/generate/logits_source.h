// Where a generator's logits come from: a session under any plan, or the
// recompute-everything reference (generate/reference_source.h), so that
// they can be compared step by step. Sequences are named by the source's
// own ids (a session's slots).
#pragma once

#include <cstdint>
#include <vector>

#include "model/prompt_batch.h"

namespace splitdec {

class Session;

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // Appends one prompt row per sequence of `seqs`; [n, seq, vocab] when
  // all_positions, else [n, vocab] of each last position.
  virtual std::vector<float> prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all_positions) = 0;
  // Throws what prompt() would throw for input it refuses, without running
  // anything (so a caller can check before it changes any state).
  virtual void check_prompt(const std::vector<int>& seqs, const PromptBatch& p) const { (void)seqs, (void)p; }
  // Feeds one token per sequence of `seqs`; [n, vocab].
  virtual std::vector<float> step(const std::vector<int>& seqs, const std::vector<int>& tokens) = 0;
  // Positions `seq` can still take (its KV capacity left).
  virtual int64_t room(int seq) const { (void)seq; return INT64_MAX; }
};

class SessionSource : public LogitsSource {
 public:
  explicit SessionSource(Session& s) : s_(s) {}
  std::vector<float> prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all_positions) override;
  void check_prompt(const std::vector<int>& seqs, const PromptBatch& p) const override;
  std::vector<float> step(const std::vector<int>& seqs, const std::vector<int>& tokens) override;
  int64_t room(int seq) const override;

 private:
  Session& s_;
};

}  // namespace splitdec
