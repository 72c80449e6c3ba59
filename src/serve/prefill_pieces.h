// How a long prompt is prefilled over several scheduler iterations: cut
// into pieces of at most `budget` positions, counted from the prompt's own
// start (so the cuts never depend on what other requests are doing), never
// inside a media block (a block longer than the budget is one piece).
#pragma once

#include <utility>
#include <vector>

#include "model/prompt_batch.h"

namespace splitdec::serve {

// [begin, end) of each piece of a one-row prompt, in order.
std::vector<std::pair<int, int>> prefill_pieces(const PromptBatch& prompt, int budget);

}  // namespace splitdec::serve
