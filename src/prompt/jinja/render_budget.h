// What one render may spend: steps (time), bytes and items built (memory)
// and value nesting (stack), against its Limits. The running render's budget
// is the thread's current one, so that value operations deep inside
// filters, methods and string functions charge it without every signature
// carrying it. Outside a render (parsing literals) nothing is charged and
// the per-value caps of the default Limits apply. Every refusal is an
// EvalFailure whose message names the limit and its value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "prompt/jinja/limits.h"

namespace splitdec::jinja {

class RenderBudget {
 public:
  explicit RenderBudget(const Limits& limits);  // becomes the thread's current budget
  ~RenderBudget();                              // restores the one before
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  const Limits& limits() const { return limits_; }
  void charge_steps(int64_t n);
  void charge_built_bytes(size_t n);

 private:
  Limits limits_;
  int64_t steps_ = 0;
  size_t built_bytes_ = 0;
  RenderBudget* previous_;
};

// The current render's limits; the defaults outside a render.
const Limits& active_limits();

// Each throws EvalFailure naming the limit it would pass.
void charge_steps(int64_t n);
void charge_scan(size_t bytes);         // work linear in a string's length: a step per 16 bytes
void charge_items(size_t items);        // work linear in a list's length: a step per item
void check_string_bytes(size_t bytes);  // before building a string of `bytes`
void check_list_items(size_t items);    // before building a list of `items`
void check_value_depth(int depth);
void note_string_built(size_t bytes);   // a string was built: its cap and the render's total
void note_items_built(size_t items, size_t item_bytes);  // a list or dict was built

}  // namespace splitdec::jinja
