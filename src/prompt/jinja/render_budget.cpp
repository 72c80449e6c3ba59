#include "prompt/jinja/render_budget.h"

#include <string>

#include "prompt/jinja/eval_failure.h"

namespace splitdec::jinja {
namespace {

thread_local RenderBudget* current_budget = nullptr;

const Limits kDefaultLimits{};

std::string over(const std::string& what, int64_t limit, const char* unit, const char* name) {
  return what + " the limit of " + std::to_string(limit) + unit + " (" + name + ")";
}

}  // namespace

RenderBudget::RenderBudget(const Limits& limits) : limits_(limits), previous_(current_budget) {
  current_budget = this;
}

RenderBudget::~RenderBudget() { current_budget = previous_; }

void RenderBudget::charge_steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) throw EvalFailure{over("the render takes more than", limits_.max_steps, " steps", "max_steps")};
}

void RenderBudget::charge_built_bytes(size_t n) {
  built_bytes_ += n;
  if (built_bytes_ > limits_.max_built_bytes)
    throw EvalFailure{over("the render builds strings and lists past", static_cast<int64_t>(limits_.max_built_bytes),
                           " bytes", "max_built_bytes")};
}

const Limits& active_limits() { return current_budget ? current_budget->limits() : kDefaultLimits; }

void charge_steps(int64_t n) {
  if (current_budget) current_budget->charge_steps(n);
}

// Calibrated on the work an evaluation step does (~0.1-0.3 us): decoding 16
// bytes of UTF-8, or copying one value of a list, costs about as much.
void charge_scan(size_t bytes) { charge_steps(static_cast<int64_t>(bytes / 16) + 1); }

void charge_items(size_t items) { charge_steps(static_cast<int64_t>(items)); }

void check_string_bytes(size_t bytes) {
  const size_t limit = active_limits().max_output_bytes;
  if (bytes > limit) throw EvalFailure{over("a string grows past", static_cast<int64_t>(limit), " bytes", "max_output_bytes")};
}

void check_list_items(size_t items) {
  const size_t limit = active_limits().max_list_items;
  if (items > limit) throw EvalFailure{over("a list grows past", static_cast<int64_t>(limit), " items", "max_list_items")};
}

void check_value_depth(int depth) {
  const int limit = active_limits().max_value_depth;
  if (depth > limit) throw EvalFailure{over("values nest deeper than", limit, "", "max_value_depth")};
}

void note_string_built(size_t bytes) {
  check_string_bytes(bytes);
  if (current_budget) current_budget->charge_built_bytes(bytes);
}

void note_items_built(size_t items, size_t item_bytes) {
  check_list_items(items);
  if (current_budget) {
    charge_items(items);
    current_budget->charge_built_bytes(items * item_bytes);
  }
}

}  // namespace splitdec::jinja
