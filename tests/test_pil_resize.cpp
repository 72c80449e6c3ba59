// pil_resize against PIL 9.4's own bytes (tests/data/media/resize, written by
// scripts/make_pil_resize_reference.py) and against the naive oracle
// (reference_resize); the families' patch layouts and Gemma-4's sizing rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "media/image_patches.h"
#include "media/pil_resize.h"
#include "media/reference_resize.h"

namespace splitdec {
namespace {

const std::string kDir = std::string(MEDIA_TEST_DATA) + "/resize/";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

nlohmann::json manifest() {
  std::ifstream f(kDir + "manifest.json");
  if (!f) throw std::runtime_error("cannot open " + kDir + "manifest.json");
  return nlohmann::json::parse(f);
}

ResampleFilter filter_named(const std::string& name) {
  if (name == "bilinear") return ResampleFilter::Bilinear;
  if (name == "bicubic") return ResampleFilter::Bicubic;
  throw std::runtime_error("unknown filter " + name);
}

const char* name_of(ResampleFilter f) { return f == ResampleFilter::Bilinear ? "bilinear" : "bicubic"; }

// How two images differ: count of unequal bytes and the largest difference.
struct Diff {
  size_t bytes = 0;
  int max = 0;
};
Diff diff(const RgbImage& a, const std::vector<uint8_t>& b) {
  Diff d;
  if (a.pixels.size() != b.size()) return Diff{b.size() + a.pixels.size(), 256};
  for (size_t i = 0; i < b.size(); ++i) {
    const int e = std::abs(int(a.pixels[i]) - int(b[i]));
    if (e != 0) ++d.bytes;
    d.max = std::max(d.max, e);
  }
  return d;
}

// A deterministic generator independent of the standard library's distributions.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return int(next() % uint64_t(n)); }
};

RgbImage random_image(SplitMix& rng, int w, int h) {
  RgbImage im{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  // Mostly noise, with runs of 0 and 255 so the clamp is exercised.
  for (auto& p : im.pixels) {
    const int r = rng.below(8);
    p = r == 0 ? 0 : r == 1 ? 255 : uint8_t(rng.next() >> 56);
  }
  return im;
}

// ---------------------------------------------------------------- resize --

TEST(PilResize, MatchesPilBytesAndTheReference) {
  const nlohmann::json m = manifest();
  const std::vector<uint8_t> sources = read_bytes(kDir + "sources.bin");
  const std::vector<uint8_t> resized = read_bytes(kDir + "resized.bin");
  std::map<std::string, RgbImage> images;
  for (const auto& s : m["sources"]) {
    const int w = s["width"], h = s["height"];
    const size_t at = s["offset"], n = size_t(w) * size_t(h) * 3;
    ASSERT_LE(at + n, sources.size());
    images[s["name"]] = RgbImage{w, h, std::vector<uint8_t>(sources.begin() + at, sources.begin() + at + n)};
  }
  ASSERT_GE(m["cases"].size(), 200u);
  size_t cases = 0, bytes = 0;
  for (const auto& c : m["cases"]) {
    const RgbImage& src = images.at(c["source"]);
    const int w = c["width"], h = c["height"];
    const size_t at = c["offset"], n = size_t(w) * size_t(h) * 3;
    ASSERT_LE(at + n, resized.size());
    const std::vector<uint8_t> pil(resized.begin() + at, resized.begin() + at + n);
    const ResampleFilter f = filter_named(c["filter"]);
    const std::string what = std::string(c["source"]) + " " + std::to_string(src.width) + "x" +
                             std::to_string(src.height) + " -> " + std::to_string(w) + "x" + std::to_string(h) + " " +
                             std::string(c["filter"]);

    const RgbImage fast = pil_resize(src, w, h, f);
    EXPECT_EQ(fast.width, w) << what;
    EXPECT_EQ(fast.height, h) << what;
    const Diff d = diff(fast, pil);
    EXPECT_EQ(d.bytes, 0u) << what << ": " << d.bytes << " bytes differ from PIL, by up to " << d.max;
    const Diff r = diff(reference_resize(src, w, h, f), pil);
    EXPECT_EQ(r.bytes, 0u) << what << ": the reference differs from PIL in " << r.bytes << " bytes, by up to "
                           << r.max;
    ++cases;
    bytes += n;
  }
  EXPECT_EQ(cases, m["cases"].size());
  std::printf("  %zu PIL %s resizes, %zu bytes compared\n", cases, std::string(m["pil_version"]).c_str(), bytes);
}

TEST(PilResize, MatchesReferenceOnRandomSizes) {
  SplitMix rng{20240601};
  int cases = 0;
  for (int i = 0; i < 400; ++i) {
    const int sw = 1 + rng.below(i % 4 == 0 ? 3 : 40), sh = 1 + rng.below(i % 5 == 0 ? 3 : 40);
    const RgbImage src = random_image(rng, sw, sh);
    // Shrink by up to 40x, grow by up to ~4x, or keep one side.
    auto pick = [&](int s) {
      switch (rng.below(4)) {
        case 0: return s;
        case 1: return 1 + rng.below(s);
        default: return 1 + rng.below(4 * s + 8);
      }
    };
    const int w = pick(sw), h = pick(sh);
    for (ResampleFilter f : {ResampleFilter::Bilinear, ResampleFilter::Bicubic}) {
      const RgbImage fast = pil_resize(src, w, h, f);
      const RgbImage ref = reference_resize(src, w, h, f);
      const Diff d = diff(fast, ref.pixels);
      EXPECT_EQ(d.bytes, 0u) << sw << "x" << sh << " -> " << w << "x" << h << " " << name_of(f) << ": " << d.bytes
                             << " bytes differ, by up to " << d.max;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 800);
}

TEST(PilResize, LargerImagesMatchReferenceWithAnyThreadCount) {
  SplitMix rng{7};
  const RgbImage src = random_image(rng, 331, 217);
  for (ResampleFilter f : {ResampleFilter::Bilinear, ResampleFilter::Bicubic}) {
    const RgbImage ref = reference_resize(src, 128, 101, f);
    const RgbImage many = pil_resize(src, 128, 101, f);
    ThreadPool::set_threads(1);
    const RgbImage one = pil_resize(src, 128, 101, f);
    ThreadPool::set_threads(0);
    EXPECT_EQ(many.pixels, ref.pixels) << name_of(f);
    EXPECT_EQ(one.pixels, ref.pixels) << name_of(f);
  }
}

TEST(PilResize, SameSizeIsACopy) {
  SplitMix rng{3};
  const RgbImage src = random_image(rng, 9, 4);
  EXPECT_EQ(pil_resize(src, 9, 4, ResampleFilter::Bicubic).pixels, src.pixels);
  EXPECT_EQ(reference_resize(src, 9, 4, ResampleFilter::Bilinear).pixels, src.pixels);
}

TEST(PilResize, ConstantImagesStayConstant) {
  // The normalized weights sum to 1 in fixed point up to rounding; a flat
  // colour must come back unchanged at every size (bicubic's lobes included).
  RgbImage flat{23, 17, {}};
  for (int i = 0; i < 23 * 17; ++i) flat.pixels.insert(flat.pixels.end(), {0, 255, 77});
  for (auto [w, h] : {std::pair{1, 1}, {5, 40}, {60, 3}, {22, 18}})
    for (ResampleFilter f : {ResampleFilter::Bilinear, ResampleFilter::Bicubic}) {
      const RgbImage out = pil_resize(flat, w, h, f);
      for (size_t i = 0; i < out.pixels.size(); i += 3) {
        ASSERT_EQ(out.pixels[i], 0);
        ASSERT_EQ(out.pixels[i + 1], 255);
        ASSERT_EQ(out.pixels[i + 2], 77);
      }
    }
}

TEST(PilResize, RefusesBadSizes) {
  SplitMix rng{5};
  const RgbImage src = random_image(rng, 4, 3);
  for (auto [w, h] : {std::pair{0, 3}, {4, 0}, {-1, 5}, {5, -7}}) {
    EXPECT_THROW(pil_resize(src, w, h, ResampleFilter::Bilinear), InputError) << w << "x" << h;
    EXPECT_THROW(reference_resize(src, w, h, ResampleFilter::Bilinear), InputError) << w << "x" << h;
  }
  EXPECT_THROW(pil_resize(RgbImage{}, 2, 2, ResampleFilter::Bicubic), InputError);
  RgbImage short_buffer = src;
  short_buffer.pixels.pop_back();
  EXPECT_THROW(pil_resize(short_buffer, 2, 2, ResampleFilter::Bicubic), InputError);
  EXPECT_THROW(reference_resize(short_buffer, 2, 2, ResampleFilter::Bicubic), InputError);
  // Sizes that would need gigabytes are refused before any allocation.
  EXPECT_THROW(pil_resize(src, 1 << 20, 1 << 20, ResampleFilter::Bilinear), InputError);
  EXPECT_THROW(pil_resize(src, 1 << 25, 1, ResampleFilter::Bilinear), InputError);
  const RgbImage tall = random_image(rng, 1, 1 << 15);
  EXPECT_THROW(pil_resize(tall, 1 << 14, 1, ResampleFilter::Bilinear), InputError);  // 2^29-pixel intermediate
}

// -------------------------------------------------------------- patches --

// A hand-made image: every byte distinct enough to tell positions apart.
RgbImage ramp(int w, int h) {
  RgbImage im{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) im.pixels[(size_t(y) * w + x) * 3 + c] = uint8_t((y * w + x) * 3 + c);
  return im;
}

// HF's PIL backend: float64 rescale cast to float32, then float32 normalize.
float hf_rescaled(int p) { return float(double(p) * (1.0 / 255.0)); }

TEST(ImagePatches, SiglipOrderIsChannelRowColumn) {
  const RgbImage square = ramp(6, 6);  // image_size already: no resize
  const ImagePatches p = siglip_patches(square, 6, 3);
  ASSERT_EQ(p.rows, 2);
  ASSERT_EQ(p.cols, 2);
  ASSERT_EQ(p.patch_dim, 27);
  ASSERT_EQ(p.data.size(), size_t(4 * 27));
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c)
      for (int ch = 0; ch < 3; ++ch)
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int px = square.at(c * 3 + kx, r * 3 + ky)[ch];
            const float got = p.data[size_t(r * 2 + c) * 27 + size_t(ch * 9 + ky * 3 + kx)];
            EXPECT_EQ(got, (hf_rescaled(px) - 0.5f) / 0.5f);
            EXPECT_NEAR(got, ((px / 255.0) - 0.5) / 0.5, 1e-6);
          }
  // A non-square image is stretched with PIL BILINEAR first.
  const RgbImage im = ramp(4, 6);
  const ImagePatches q = siglip_patches(im, 6, 3);
  const RgbImage stretched = pil_resize(im, 6, 6, ResampleFilter::Bilinear);
  EXPECT_EQ(q.data[27 + 9 + 3 + 2], (hf_rescaled(stretched.at(3 + 2, 1)[1]) - 0.5f) / 0.5f);
}

TEST(ImagePatches, SiglipValuesCoverEveryByte) {
  RgbImage im{16, 16, std::vector<uint8_t>(16 * 16 * 3)};
  for (int i = 0; i < 256; ++i)
    for (int c = 0; c < 3; ++c) im.pixels[size_t(i) * 3 + c] = uint8_t((i + 85 * c) & 255);
  const ImagePatches p = siglip_patches(im, 16, 16);
  ASSERT_EQ(p.rows * p.cols, 1);
  double max_error = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int i = 0; i < 256; ++i) {
      const int px = (i + 85 * ch) & 255;
      const float got = p.data[size_t(ch * 256 + i)];
      max_error = std::max(max_error, std::fabs(got - ((px / 255.0) - 0.5) / 0.5));
      EXPECT_EQ(got, (hf_rescaled(px) - 0.5f) / 0.5f) << px;
    }
  EXPECT_EQ(p.data[0], -1.0f);  // byte 0 in channel 0
  EXPECT_LT(max_error, 1e-7);
}

TEST(ImagePatches, Gemma4OrderIsRowColumnChannel) {
  // 8x4 at budget 2, patch 2, pool 2 is already the target size: no resize.
  const RgbImage im = ramp(8, 4);
  ASSERT_EQ(gemma4_target_size(8, 4, 2, 2, 2).width, 8);
  ASSERT_EQ(gemma4_target_size(8, 4, 2, 2, 2).height, 4);
  const ImagePatches p = gemma4_patches(im, 2, 2, 2, false);
  ASSERT_EQ(p.rows, 2);
  ASSERT_EQ(p.cols, 4);
  ASSERT_EQ(p.patch_dim, 12);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      for (int py = 0; py < 2; ++py)
        for (int px = 0; px < 2; ++px)
          for (int ch = 0; ch < 3; ++ch) {
            const int v = im.at(c * 2 + px, r * 2 + py)[ch];
            const float got = p.data[size_t(r * 4 + c) * 12 + size_t((py * 2 + px) * 3 + ch)];
            EXPECT_EQ(got, hf_rescaled(v));  // x / 255, no normalize
            EXPECT_NEAR(got, v / 255.0, 1e-7);
          }
  // Merged (gemma4_unified): one 4x4 patch per pool group, (row, col, channel).
  const ImagePatches m = gemma4_patches(im, 2, 2, 2, true);
  ASSERT_EQ(m.rows, 1);
  ASSERT_EQ(m.cols, 2);
  ASSERT_EQ(m.patch_dim, 48);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        for (int ch = 0; ch < 3; ++ch)
          EXPECT_EQ(m.data[size_t(c) * 48 + size_t((y * 4 + x) * 3 + ch)], hf_rescaled(im.at(c * 4 + x, y)[ch]));
}

TEST(ImagePatches, Gemma4MergedIsPoolGroupsOfPatches) {
  SplitMix rng{11};
  const RgbImage im = random_image(rng, 200, 150);
  const ImageSize size = gemma4_target_size(200, 150, 70, 16, 3);
  const ImagePatches p = gemma4_patches(im, 70, 16, 3, false);
  const ImagePatches m = gemma4_patches(im, 70, 16, 3, true);
  ASSERT_EQ(p.rows * 16, size.height);
  ASSERT_EQ(p.cols * 16, size.width);
  ASSERT_EQ(m.rows * 3, p.rows);
  ASSERT_EQ(m.cols * 3, p.cols);
  ASSERT_EQ(m.patch_dim, 6912);
  ASSERT_LE(m.rows * m.cols, 70);
  // The patches are the bicubic resize, rescaled.
  const RgbImage sized = pil_resize(im, size.width, size.height, ResampleFilter::Bicubic);
  EXPECT_EQ(p.data[size_t(p.cols + 1) * 768 + (5 * 16 + 7) * 3 + 2], hf_rescaled(sized.at(16 + 7, 16 + 5)[2]));
  for (int R = 0; R < m.rows; ++R)
    for (int C = 0; C < m.cols; ++C)
      for (int y = 0; y < 48; ++y)
        for (int x = 0; x < 48; ++x)
          for (int ch = 0; ch < 3; ++ch) {
            const size_t small = size_t((R * 3 + y / 16) * p.cols + (C * 3 + x / 16)) * 768 +
                                 size_t(((y % 16) * 16 + x % 16) * 3 + ch);
            ASSERT_EQ(m.data[size_t(R * m.cols + C) * 6912 + size_t((y * 48 + x) * 3 + ch)], p.data[small]);
          }
}

TEST(ImagePatches, Gemma4TargetSizeExamples) {
  auto size = [](int w, int h, int budget) { return gemma4_target_size(w, h, budget, 16, 3); };
  auto tokens = [](ImageSize s) { return (s.width / 48) * (s.height / 48); };
  EXPECT_EQ(size(896, 896, 280).width, 768);
  EXPECT_EQ(size(896, 896, 280).height, 768);
  EXPECT_EQ(tokens(size(896, 896, 280)), 256);
  EXPECT_EQ(size(1024, 1024, 280).width, 768);
  EXPECT_EQ(size(1920, 1080, 280).width, 1056);
  EXPECT_EQ(size(1920, 1080, 280).height, 576);
  EXPECT_EQ(tokens(size(1920, 1080, 280)), 264);
  EXPECT_EQ(size(1920, 1080, 1120).width, 2112);
  EXPECT_EQ(size(1920, 1080, 1120).height, 1200);
  EXPECT_EQ(tokens(size(1920, 1080, 1120)), 1100);
  // Tiny images are scaled up to the budget.
  EXPECT_EQ(size(1, 1, 280).width, 768);
  EXPECT_EQ(size(1, 1, 280).height, 768);
  // Extreme aspect ratios: the short side rounds to 0 and becomes one token
  // side (48); the long side keeps the ratio, capped at budget * 48.
  EXPECT_EQ(size(10000, 1, 280).width, 13440);
  EXPECT_EQ(size(10000, 1, 280).height, 48);
  EXPECT_EQ(size(1, 10000, 280).width, 48);
  EXPECT_EQ(size(1, 10000, 280).height, 13440);
  EXPECT_EQ(size(3000, 2, 70).width, 70 * 48);
  EXPECT_EQ(size(2810, 10, 280).width, 13440);  // a ratio just over the budget
  EXPECT_EQ(size(2810, 10, 280).height, 48);
}

TEST(ImagePatches, Gemma4TargetSizeMatchesTheProcessorFormula) {
  const nlohmann::json m = manifest();
  ASSERT_GE(m["gemma4_sizes"].size(), 500u);
  for (const auto& c : m["gemma4_sizes"]) {
    const int w = c["width"], h = c["height"], budget = c["budget"];
    if (c["target"].is_null()) {
      EXPECT_THROW(gemma4_target_size(w, h, budget, 16, 3), InputError) << w << "x" << h << "@" << budget;
      continue;
    }
    const ImageSize s = gemma4_target_size(w, h, budget, 16, 3);
    EXPECT_EQ(s.width, int(c["target"][0])) << w << "x" << h << "@" << budget;
    EXPECT_EQ(s.height, int(c["target"][1])) << w << "x" << h << "@" << budget;
  }
}

TEST(ImagePatches, ExtremeAspectImagesBecomePatches) {
  SplitMix rng{13};
  const RgbImage line = random_image(rng, 10000, 1);
  const ImagePatches p = gemma4_patches(line, 280, 16, 3, true);
  EXPECT_EQ(p.rows, 1);
  EXPECT_EQ(p.cols, 280);
  const RgbImage column = random_image(rng, 1, 2000);
  const ImagePatches q = gemma4_patches(column, 70, 16, 3, false);
  EXPECT_EQ(q.cols, 3);
  EXPECT_EQ(q.rows, 70 * 3);
  const RgbImage dot = random_image(rng, 1, 1);
  const ImagePatches r = gemma4_patches(dot, 70, 16, 3, false);
  EXPECT_EQ(r.rows * r.cols / 9, 64);  // 1x1 -> 384x384: sqrt(70) floored to 8 tokens a side
  // One source pixel: every weight window is that pixel alone, weight 1.
  for (size_t i = 0; i < r.data.size(); ++i) ASSERT_EQ(r.data[i], hf_rescaled(dot.pixels[i % 3])) << i;
}

TEST(ImagePatches, RefusesBadInput) {
  const RgbImage im = ramp(8, 8);
  EXPECT_THROW(gemma4_target_size(0, 5, 280, 16, 3), InputError);
  EXPECT_THROW(gemma4_target_size(5, -1, 280, 16, 3), InputError);
  EXPECT_THROW(gemma4_target_size(5, 5, 0, 16, 3), InputError);
  EXPECT_THROW(gemma4_target_size(5, 5, 1 << 30, 16, 3), InputError);  // beyond the pixel limit
  EXPECT_THROW(gemma4_target_size(5, 5, 280, 0, 3), ConfigError);
  EXPECT_THROW(gemma4_target_size(5, 5, 1 << 30, 1 << 30, 1 << 30), InputError);  // no overflow on the way
  EXPECT_THROW(gemma4_patches(RgbImage{}, 280, 16, 3, false), InputError);
  EXPECT_THROW(siglip_patches(RgbImage{}, 896, 14), InputError);
  EXPECT_THROW(siglip_patches(im, 10, 3), ConfigError);
  EXPECT_THROW(siglip_patches(im, 0, 14), ConfigError);
  EXPECT_THROW(siglip_patches(im, 1 << 14, 16), InputError);
  try {
    gemma4_target_size(5, 5, 1 << 30, 16, 3);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("16777216"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace splitdec
