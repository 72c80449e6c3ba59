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

// Gemma-3 pan-and-scan (HF image_processing_gemma3.py, pan_and_scan), with
// the processor's defaults. Crops come from the original-resolution image
// and are then prepared like the whole image (siglip_patches).
struct PanAndScanOptions {
  int min_crop_size = 256;
  int max_num_crops = 4;
  double min_ratio_to_activate = 1.2;
};
struct CropBox {
  int x = 0, y = 0, width = 0, height = 0;
};
// Landscape (width >= height; portrait is the same on the other side): none
// when width / height < min_ratio; n = floor(width / height + 0.5), at most
// floor(width / min_crop_size), clamped to [2, max_num_crops]; crops of
// ceil(width / n) x height at x = i * that (the last may be narrower); none
// when a crop side is under min_crop_size.
std::vector<CropBox> pan_and_scan_boxes(int width, int height, const PanAndScanOptions& options = {});
std::vector<RgbImage> pan_and_scan_crops(const RgbImage& image, const PanAndScanOptions& options = {});

}  // namespace splitdec
