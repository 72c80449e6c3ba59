// From a decoded image to the patch vectors a vision frontend reads, in each
// family's order (Hugging Face's processors): resize, rescale, normalize,
// cut into patches. No padding: the encoders run on the real patches only
// (HF pads to a fixed count and masks the padding out; the rows are equal).
#pragma once

#include <vector>

#include "media/rgb_image.h"

namespace splitdec {

// Patches on a grid, row-major (index = row * cols + col).
struct ImagePatches {
  int rows = 0, cols = 0;
  int patch_dim = 0;        // values per patch
  std::vector<float> data;  // [rows * cols, patch_dim]
};

// Gemma-3 (SigLIP): stretch to image_size x image_size with PIL BILINEAR,
// x / 255, (x - 0.5) / 0.5, patches of `patch` px in (channel, y, x) order
// (the Conv2d OIHW weight flattened).
ImagePatches siglip_patches(const RgbImage& image, int image_size, int patch);

// Gemma-4's size for a soft-token budget (image_processing_gemma4.py,
// get_aspect_ratio_preserving_size): f = sqrt(budget * pool^2 * patch^2 /
// (H * W)), sides floored to multiples of patch * pool (both up- and
// down-scaling), a zero side set to patch * pool and the other capped.
struct ImageSize {
  int width = 0, height = 0;
};
ImageSize gemma4_target_size(int width, int height, int budget, int patch, int pool);

// Gemma-4: resize to gemma4_target_size with PIL BICUBIC, x / 255, patches
// of `patch` px in (y, x, channel) order (the vision encoder), or with
// `merged` of patch * pool px (gemma4_unified's patches_merge: each pool x
// pool group of patches as one vector, the same as cutting at patch * pool).
ImagePatches gemma4_patches(const RgbImage& image, int budget, int patch, int pool, bool merged);

}  // namespace splitdec
