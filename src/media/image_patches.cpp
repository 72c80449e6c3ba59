#include "media/image_patches.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "media/pil_resize.h"

namespace splitdec {

namespace {

// The largest image a frontend is asked to build: 4096^2 pixels (Gemma-4's
// largest budget, 1120 tokens, needs 2.6 M; SigLIP 896^2 = 0.8 M).
constexpr int64_t kMaxTargetPixels = int64_t(1) << 24;

std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

void check_image(const RgbImage& image, const char* what) {
  if (image.width < 1 || image.height < 1)
    throw InputError(std::string(what) + ": the image is " + dims(image.width, image.height) +
                     " (at least 1x1 is needed)");
  if (image.pixels.size() != size_t(image.width) * size_t(image.height) * 3)
    throw InputError(std::string(what) + ": the " + dims(image.width, image.height) + " RGB image holds " +
                     std::to_string(image.pixels.size()) + " bytes, not width * height * 3");
}

// HF's PIL backend rescales in float64 (uint8 * 1/255) and only then casts
// to float32 (image_transforms.rescale); a table keeps those exact values.
const std::array<float, 256>& rescaled_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int p = 0; p < 256; ++p) t[size_t(p)] = float(double(p) * (1.0 / 255.0));
    return t;
  }();
  return table;
}

// HF's normalize runs in the image dtype: (x - mean) / std in float32.
const std::array<float, 256>& siglip_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    const float mean = 0.5f, std = 0.5f;
    for (int p = 0; p < 256; ++p) t[size_t(p)] = (rescaled_values()[size_t(p)] - mean) / std;
    return t;
  }();
  return table;
}

}  // namespace

ImagePatches siglip_patches(const RgbImage& image, int image_size, int patch) {
  check_image(image, "SigLIP image");
  if (patch < 1 || image_size < patch || image_size % patch != 0)
    throw ConfigError("SigLIP: image_size " + std::to_string(image_size) + " is not a positive multiple of patch_size " +
                      std::to_string(patch));
  if (int64_t(image_size) * image_size > kMaxTargetPixels)
    throw InputError("SigLIP: image_size " + std::to_string(image_size) + " exceeds the " +
                     std::to_string(kMaxTargetPixels) + "-pixel limit");
  // Stretch to a square (no aspect kept), as the Gemma-3 processor does.
  const RgbImage sized = pil_resize(image, image_size, image_size, ResampleFilter::Bilinear);
  const auto& value = siglip_values();

  ImagePatches out;
  out.rows = out.cols = image_size / patch;
  out.patch_dim = 3 * patch * patch;
  out.data.resize(size_t(out.rows) * size_t(out.cols) * size_t(out.patch_dim));
  float* dst = out.data.data();
  for (int r = 0; r < out.rows; ++r)
    for (int c = 0; c < out.cols; ++c)
      // (channel, y, x): the Conv2d OIHW kernel flattened.
      for (int ch = 0; ch < 3; ++ch)
        for (int y = 0; y < patch; ++y)
          for (int x = 0; x < patch; ++x) *dst++ = value[sized.at(c * patch + x, r * patch + y)[ch]];
  return out;
}

ImageSize gemma4_target_size(int width, int height, int budget, int patch, int pool) {
  if (width < 1 || height < 1)
    throw InputError("Gemma-4 image: the image is " + dims(width, height) + " (at least 1x1 is needed)");
  if (patch < 1 || pool < 1) throw ConfigError("Gemma-4 image: patch size and pooling kernel must be positive");
  if (budget < 1) throw InputError("Gemma-4 image: the soft-token budget " + std::to_string(budget) + " is not positive");
  const int64_t side = int64_t(patch) * pool;  // one token's side in pixels
  // max_patches * patch^2 = budget * side^2; side is bounded first so the
  // product cannot overflow.
  if (side > 4096 || int64_t(budget) * side * side > kMaxTargetPixels)
    throw InputError("Gemma-4 image: a budget of " + std::to_string(budget) + " tokens at " + std::to_string(side) +
                     " px per token side asks for more than the " + std::to_string(kMaxTargetPixels) + "-pixel limit");
  const int64_t target_px = int64_t(budget) * side * side;

  // get_aspect_ratio_preserving_size, in Python's float64 steps.
  const double factor = std::sqrt(double(target_px) / double(int64_t(width) * height));
  int64_t th = int64_t(std::floor(factor * height / double(side))) * side;
  int64_t tw = int64_t(std::floor(factor * width / double(side))) * side;
  if (th == 0 && tw == 0)
    throw InputError("Gemma-4 image " + dims(width, height) + ": both sides round to 0 at " + std::to_string(side) +
                     " px per token side");
  // A side that rounds to 0 (an extreme aspect ratio) becomes one token
  // side; the other keeps the ratio, capped at the whole budget in a line.
  const int64_t max_side = int64_t(budget) * side;  // (max_patches // pool^2) * side
  if (th == 0) {
    th = side;
    tw = std::min(int64_t(std::floor(double(width) / double(height))) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(int64_t(std::floor(double(height) / double(width))) * side, max_side);
  }
  if (th * tw > target_px)
    throw InputError("Gemma-4 image " + dims(width, height) + ": the size " + dims(tw, th) + " exceeds the budget of " +
                     std::to_string(budget) + " tokens");
  return ImageSize{int(tw), int(th)};
}

ImagePatches gemma4_patches(const RgbImage& image, int budget, int patch, int pool, bool merged) {
  check_image(image, "Gemma-4 image");
  const ImageSize size = gemma4_target_size(image.width, image.height, budget, patch, pool);
  // pil_resize copies for an unchanged size, as HF skips the resize then.
  const RgbImage sized = pil_resize(image, size.width, size.height, ResampleFilter::Bicubic);
  const auto& value = rescaled_values();

  // A merged patch (gemma4_unified) is a pool x pool group of patches in
  // (row, col, channel) order, the same as cutting at patch * pool.
  const int p = merged ? patch * pool : patch;
  ImagePatches out;
  out.rows = size.height / p;
  out.cols = size.width / p;
  out.patch_dim = p * p * 3;
  out.data.resize(size_t(out.rows) * size_t(out.cols) * size_t(out.patch_dim));
  float* dst = out.data.data();
  for (int r = 0; r < out.rows; ++r)
    for (int c = 0; c < out.cols; ++c)
      for (int y = 0; y < p; ++y) {
        // (y, x, channel): one patch row is contiguous in the image.
        const uint8_t* src = sized.at(c * p, r * p + y);
        for (int i = 0; i < p * 3; ++i) *dst++ = value[src[i]];
      }
  return out;
}

std::vector<CropBox> pan_and_scan_boxes(int width, int height, const PanAndScanOptions& o) {
  if (width < 1 || height < 1 || o.min_crop_size < 1 || o.max_num_crops < 2) return {};
  // The long side is cut; the short one is kept whole.
  const bool landscape = width >= height;
  const int64_t along = landscape ? width : height, across = landscape ? height : width;
  // Python's float division, as HF compares it (600 / 500 == 1.2 activates).
  const double ratio = double(along) / double(across);
  if (ratio < o.min_ratio_to_activate) return {};
  int64_t n = int64_t(std::floor(ratio + 0.5));
  n = std::min(along / o.min_crop_size, n);
  n = std::min<int64_t>(o.max_num_crops, std::max<int64_t>(2, n));
  const int64_t crop = (along + n - 1) / n;  // ceil(along / n)
  if (std::min(crop, across) < o.min_crop_size) return {};
  std::vector<CropBox> boxes;
  for (int64_t i = 0; i < n; ++i) {
    const int at = int(i * crop), size = int(std::min(crop, along - i * crop));
    boxes.push_back(landscape ? CropBox{at, 0, size, height} : CropBox{0, at, width, size});
  }
  return boxes;
}

std::vector<RgbImage> pan_and_scan_crops(const RgbImage& image, const PanAndScanOptions& options) {
  check_image(image, "pan-and-scan image");
  std::vector<RgbImage> crops;
  for (const CropBox& b : pan_and_scan_boxes(image.width, image.height, options)) {
    RgbImage c;
    c.width = b.width;
    c.height = b.height;
    c.pixels.resize(size_t(b.width) * size_t(b.height) * 3);
    for (int y = 0; y < b.height; ++y)
      std::memcpy(c.pixels.data() + size_t(y) * size_t(b.width) * 3, image.at(b.x, b.y + y), size_t(b.width) * 3);
    crops.push_back(std::move(c));
  }
  return crops;
}

}  // namespace splitdec
