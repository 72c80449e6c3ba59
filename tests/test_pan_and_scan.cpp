// Gemma-3 pan-and-scan (HF's do_pan_and_scan, off by default): the crop
// geometry against cases worked by hand from HF's pan_and_scan, the rows
// (the original's, then each crop's, each encoded alone) and the prompt text
// HF's processor writes around the 1 + crops image blocks.
//
// tests/data/media/panscan/wide_800x260.png was made with:
//   python3 -c "from PIL import Image; w,h=800,260; im=Image.new('RGB',(w,h));
//     im.putdata([((x*255)//(w-1),(y*255)//(h-1),((x//40+y//40)%2)*200+20) for y in range(h) for x in range(w)]);
//     im.save('wide_800x260.png', optimize=True)"
// 800 / 260 = 3.08: n = floor(3.58) = 3, floor(800 / 256) = 3, crops of
// ceil(800 / 3) = 267 x 260 at x = 0, 267, 534 (the last 266 wide).
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "media/image_file.h"
#include "media/image_patches.h"
#include "media/media_frontend.h"
#include "test_support.h"

using namespace splitdec;

namespace {

const std::string kWidePng = std::string(MEDIA_TEST_DATA) + "/panscan/wide_800x260.png";

std::vector<std::array<int, 4>> boxes(int w, int h) {
  std::vector<std::array<int, 4>> out;
  for (const CropBox& b : pan_and_scan_boxes(w, h)) out.push_back({b.x, b.y, b.width, b.height});
  return out;
}

// The pixels of [x, x + w) x [y, y + h), copied here pixel by pixel.
RgbImage cut(const RgbImage& img, int x, int y, int w, int h) {
  RgbImage c;
  c.width = w;
  c.height = h;
  for (int r = 0; r < h; ++r)
    for (int q = 0; q < w; ++q)
      for (int ch = 0; ch < 3; ++ch) c.pixels.push_back(img.at(x + q, y + r)[ch]);
  return c;
}

// The tokenize command's pieces, soft tokens counted and left out, as text.
struct Shown {
  std::string text;
  int soft = 0, blocks = 0;
  std::vector<int> ids;
};
Shown tokenize(const std::string& args) {
  const auto r = test::run_splitdec("tokenize " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  Shown s;
  if (r.exit_code != 0) return s;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  for (const auto& p : j["pieces"]) {
    std::string piece = p.get<std::string>();
    if (piece == "<image_soft_token>") {
      ++s.soft;
      continue;
    }
    s.blocks += piece == "<start_of_image>";
    if (piece == "<0x0A>") piece = "\n";
    for (size_t at = piece.find("\xe2\x96\x81"); at != std::string::npos; at = piece.find("\xe2\x96\x81"))
      piece.replace(at, 3, " ");
    s.text += piece;
  }
  for (const auto& t : j["tokens"]) s.ids.push_back(t.get<int>());
  return s;
}

std::string tokens_line(const std::string& output) {
  const size_t at = output.find("[0] tokens:");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

}  // namespace

TEST(PanAndScan, CropGeometryMatchesHfByHand) {
  using B = std::vector<std::array<int, 4>>;
  // 1000 / 300 = 3.33: n = floor(3.83) = 3 (floor(1000 / 256) = 3), ceil(1000 / 3) = 334; last 332.
  EXPECT_EQ(boxes(1000, 300), (B{{0, 0, 334, 300}, {334, 0, 334, 300}, {668, 0, 332, 300}}));
  // Portrait, the same on the other side.
  EXPECT_EQ(boxes(300, 1000), (B{{0, 0, 300, 334}, {0, 334, 300, 334}, {0, 668, 300, 332}}));
  // 600 / 500 is exactly 1.2, not under it: n = floor(1.7) = 1 -> clamped to 2, crops of 300 x 500.
  EXPECT_EQ(boxes(600, 500), (B{{0, 0, 300, 500}, {300, 0, 300, 500}}));
  // 590 / 500 = 1.18 < 1.2: none; a square: none.
  EXPECT_TRUE(boxes(590, 500).empty());
  EXPECT_TRUE(boxes(512, 512).empty());
  // Too small: 400 x 300 would be 2 crops of 200 < 256; 2000 x 250 crops are 250 high.
  EXPECT_TRUE(boxes(400, 300).empty());
  EXPECT_TRUE(boxes(2000, 250).empty());
  // At most 4: 3000 / 300 = 10 -> 4 crops of 750; 1100 x 256: floor(1100 / 256) = 4, ratio 4.3 -> 4 of 275.
  EXPECT_EQ(boxes(3000, 300).size(), 4u);
  EXPECT_EQ(boxes(1100, 256), (B{{0, 0, 275, 256}, {275, 0, 275, 256}, {550, 0, 275, 256}, {825, 0, 275, 256}}));
  // floor(w / 256) caps n below the ratio: 700 x 200 is ratio 3.5 -> 4, but 700 / 256 -> 2 crops of 350 x 200 < 256: none.
  EXPECT_TRUE(boxes(700, 200).empty());
  EXPECT_TRUE(boxes(0, 10).empty());
  // The crops hold the original's pixels.
  const RgbImage wide = read_image_file(kWidePng);
  ASSERT_EQ(wide.width, 800);
  ASSERT_EQ(wide.height, 260);
  const std::vector<RgbImage> crops = pan_and_scan_crops(wide);
  ASSERT_EQ(crops.size(), 3u);
  const int xs[] = {0, 267, 534}, ws[] = {267, 267, 266};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(crops[size_t(k)].width, ws[k]);
    EXPECT_EQ(crops[size_t(k)].pixels, cut(wide, xs[k], 0, ws[k], 260).pixels) << k;
  }
}

TEST(PanAndScan, RowsAreTheOriginalThenEachCropEncodedAlone) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const TensorStore store = TensorStore::open_dir(dir);
  const auto frontend = MediaFrontend::load(dir, test::tiny_model("tiny-gemma3").config(), store);
  ASSERT_TRUE(frontend->has_vision());
  const RgbImage wide = read_image_file(kWidePng);
  const MediaEmbeddings plain = frontend->encode_image(wide);
  EXPECT_EQ(plain.crops, 0);
  ASSERT_EQ(plain.rows, 16);
  ImageOptions pas;
  pas.pan_and_scan = true;
  const MediaEmbeddings m = frontend->encode_image(wide, pas);
  EXPECT_EQ(m.crops, 3);
  ASSERT_EQ(m.rows, 4 * 16);
  EXPECT_EQ(frontend->count_image_tokens(wide, pas), 64);
  EXPECT_EQ(frontend->count_image_crops(wide, pas), 3);
  const size_t block = plain.data.size();
  ASSERT_EQ(m.data.size(), 4 * block);
  EXPECT_EQ(std::vector<float>(m.data.begin(), m.data.begin() + std::ptrdiff_t(block)), plain.data);
  const int xs[] = {0, 267, 534}, ws[] = {267, 267, 266};
  for (int k = 0; k < 3; ++k) {
    const MediaEmbeddings alone = frontend->encode_image(cut(wide, xs[k], 0, ws[k], 260));
    const auto from = m.data.begin() + std::ptrdiff_t(size_t(k + 1) * block);
    EXPECT_EQ(std::vector<float>(from, from + std::ptrdiff_t(block)), alone.data) << "crop " << k;
    EXPECT_NE(alone.data, plain.data);
  }
  // A square image takes no crops even when asked.
  const RgbImage square = cut(wide, 0, 0, 260, 260);
  EXPECT_EQ(frontend->encode_image(square, pas).rows, 16);
  EXPECT_EQ(frontend->encode_image(square, pas).crops, 0);
}

TEST(PanAndScan, ChatPromptHoldsHfTextAndOneBlockPerImage) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string base = "--model " + dir + " --chat --image " + kWidePng + " --prompt hi";
  const Shown on = tokenize(base + " --pan-and-scan");
  const std::string block = "\n\n<start_of_image><end_of_image>\n\n";
  EXPECT_NE(on.text.find("<start_of_turn>user\nHere is the original image " + block +
                         " and here are some crops to help you see better " + block + " " + block + " " + block +
                         "hi<end_of_turn>\n"),
            std::string::npos)
      << on.text;
  EXPECT_EQ(on.blocks, 4);
  EXPECT_EQ(on.soft, 4 * 16);
  // Off by default: one block, no pan-and-scan text.
  const Shown off = tokenize(base);
  EXPECT_EQ(off.blocks, 1);
  EXPECT_EQ(off.soft, 16);
  EXPECT_NE(off.text.find("<start_of_turn>user\n" + block + "hi<end_of_turn>"), std::string::npos) << off.text;
  EXPECT_EQ(off.text.find("original"), std::string::npos);
  // The plain shorthand writes the same text around its (newline-less) blocks.
  const Shown plain = tokenize("--model " + dir + " --pan-and-scan --prompt 'Look: <image:" + kWidePng + "> ok'");
  EXPECT_EQ(plain.blocks, 4);
  EXPECT_EQ(plain.soft, 64);
  const std::string b = "<start_of_image><end_of_image>";
  EXPECT_NE(plain.text.find("Here is the original image " + b + " and here are some crops to help you see better " + b +
                            " " + b + " " + b + " ok"),
            std::string::npos)
      << plain.text;
}

TEST(PanAndScan, GenerateAgreesAcrossPlansAndEmbedMediaWritesEveryBlock) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  std::string first;
  for (const char* plan : {"reference", "split"}) {
    const auto r = test::run_splitdec("generate --model " + dir + " --chat --pan-and-scan --image " + kWidePng +
                                      " --prompt 'What is this?' --max-new-tokens 4 --plan " + plan + " --trace");
    ASSERT_EQ(r.exit_code, 0) << plan << "\n" << r.output;
    if (first.empty()) first = tokens_line(r.output);
    EXPECT_EQ(tokens_line(r.output), first) << plan;
  }
  EXPECT_FALSE(first.empty());
  const std::string out = test::temp_dir("panscan") + "/rows.npy";
  const auto e = test::run_splitdec("embed-media --model " + dir + " --pan-and-scan --image " + kWidePng + " --out " + out);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("64 rows"), std::string::npos) << e.output;
}

TEST(PanAndScan, OtherFamiliesRefuseTheFlag) {
  for (const char* preset : {"tiny-gemma4", "tiny-gemma4-unified"}) {
    const std::string dir = test::tiny_model_dir(preset);
    for (const std::string& cmd :
         {"tokenize --model " + dir + " --chat --pan-and-scan --image " + kWidePng + " --prompt hi",
          "generate --model " + dir + " --chat --pan-and-scan --image " + kWidePng + " --prompt hi --max-new-tokens 1",
          "embed-media --model " + dir + " --pan-and-scan --image " + kWidePng + " --out /dev/null"}) {
      const auto r = test::run_splitdec(cmd);
      EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
      EXPECT_NE(r.output.find("--pan-and-scan"), std::string::npos) << cmd << "\n" << r.output;
    }
  }
  EXPECT_NE(test::run_splitdec("embed-media --model " + test::tiny_model_dir("tiny-gemma3") +
                               " --pan-and-scan --audio " + kWidePng + " --out /dev/null")
                .output.find("--pan-and-scan applies to --image"),
            std::string::npos);
}
