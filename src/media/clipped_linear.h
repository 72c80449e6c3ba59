// Gemma4ClippableLinear's weights: clamp(input) -> matmul -> clamp(output),
// the bounds being checkpoint scalars (the E2B/E4B vision and audio towers);
// absent bounds do nothing. The towers run it through tower::clipped_linear.
#pragma once

#include <optional>

#include "kernels/weight_matrix.h"

namespace splitdec {

struct ClippedLinear {
  WeightMatrix weight;
  struct Bounds {
    float input_min, input_max, output_min, output_max;
  };
  std::optional<Bounds> clip;
};

}  // namespace splitdec
