// A past without its prefill: decode cost does not depend on the values in
// the cache, so a benchmark at long contexts fills it with zeros instead of
// paying for the prompt.
#pragma once

#include <cstdint>

#include "pipeline/session.h"

namespace splitdec {

// Positions [0, length) of empty live sequence `seq` become its past, as if
// a text prompt had been prefilled, with zero K/V.
void fill_synthetic(Session& session, int seq, int64_t length);

}  // namespace splitdec
