// The naive oracle for pil_resize (media/pil_resize.h): the same definition
// (PIL 9.4's antialiased separable convolution) computed the plain way. Each
// axis is a dense [out, in] weight matrix built in float64 by evaluating the
// filter at every input sample (no window bounds, no tables shared between
// passes, no threads); a pass is a matrix product over whole rows or columns
// with 64-bit sums. What is kept from PIL on purpose is only what defines its
// output bytes: the weights normalized to sum 1 and rounded to 22 fraction
// bits (half away from zero), each sum started at one half and floored, every
// pass clamped to 0..255 into an 8-bit image, horizontal pass first, a pass
// skipped when its size does not change, and a plain copy for the same size.
//
// Where it may differ from PIL, and why it does not in practice:
// - Window. PIL reads inputs [trunc(c - s + 0.5), trunc(c + s + 0.5)) around
//   each centre c (support s); this oracle reads every input whose weight is
//   non-zero. The two sets are equal except for a sample lying exactly on
//   the support edge, where the weight is 0 in exact arithmetic and at most
//   a few ulps after rounding; such a weight rounds to 0 in fixed point and
//   can change the normalizing sum only in its last bits.
// - Overflow. PIL sums in int32; this oracle in int64. For BILINEAR and
//   BICUBIC the sums stay below 2^31 (|weights| sum to at most ~1.3), so both
//   give the same bytes.
// Sizes: the same rules as pil_resize (>= 1x1 in and out; InputError otherwise).
// Cost is O(in * out) per row and column: meant for small images.
#pragma once

#include "media/pil_resize.h"
#include "media/rgb_image.h"

namespace splitdec {

RgbImage reference_resize(const RgbImage& src, int width, int height, ResampleFilter filter);

}  // namespace splitdec
