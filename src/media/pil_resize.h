// Image resizing that matches PIL's Image.resize bit for bit on uint8 RGB:
// PIL's separable convolution resampler (antialiased: the filter support
// widens by the scale factor when shrinking), its fixed-point coefficients
// and rounding, the horizontal pass first into an 8-bit intermediate. Gemma-3
// resizes with BILINEAR, Gemma-4 with BICUBIC (a = -0.5).
// The naive reference (same definition, float64, no fixed point) is
// reference_resize() in media/reference_resize.h.
#pragma once

#include "media/rgb_image.h"

namespace splitdec {

enum class ResampleFilter { Bilinear, Bicubic };

// Any size in and out (>= 1 x 1). Same size in and out returns a copy, as PIL does.
RgbImage pil_resize(const RgbImage& src, int width, int height, ResampleFilter filter);

}  // namespace splitdec
