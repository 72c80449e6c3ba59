// Image and audio files end to end: a PNG / JPEG / WAV through the model's
// frontends, as a user meets them (the API, generate, embed-media), checked
// against an independent rebuild of Hugging Face's pipeline.
//
// The independent side starts from pixels PIL itself resized
// (tests/data/media/pipeline/, scripts/make_media_pipeline_reference.py),
// cuts and scales its own patches here, and runs the float64 reference
// towers (media/reference_towers.h): it shares no code with splitdec's
// resizer, patch extraction or fast towers.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "io/safetensors.h"
#include "media/frontend_config.h"
#include "media/frontend_weights.h"
#include "media/image_file.h"
#include "media/reference_towers.h"
#include "splitdec/splitdec.h"
#include "test_support.h"

using namespace splitdec;

namespace {

const std::string kData = MEDIA_TEST_DATA;
const std::string kPipeline = kData + "/pipeline";
const std::string kDemoPng = DEMO_PNG;

struct Frontend {
  FrontendConfig config;
  FrontendWeights weights;
};

Frontend load_frontend(const std::string& preset) {
  const std::string dir = test::tiny_model_dir(preset);
  Frontend f;
  f.config = load_frontend_config(dir, test::tiny_model(preset).config());
  const TensorStore store = TensorStore::open_dir(dir);
  EXPECT_TRUE(load_frontend_weights(f.config, store, f.weights)) << preset;
  return f;
}

// HF's processors: x / 255 (rescale), then (x - mean) / std where the family normalizes.
double rescaled(uint8_t p) { return double(p) / 255.0; }

// Patches of `size` px cut from `img` on a row-major grid; `channel_first`:
// each vector in (c, y, x) order (SigLIP's Conv2d weight), else (y, x, c).
ImagePatches cut_patches(const RgbImage& img, int size, bool channel_first, bool normalize) {
  ImagePatches p;
  p.rows = img.height / size;
  p.cols = img.width / size;
  p.patch_dim = 3 * size * size;
  p.data.resize(size_t(p.rows) * size_t(p.cols) * size_t(p.patch_dim));
  for (int gr = 0; gr < p.rows; ++gr)
    for (int gc = 0; gc < p.cols; ++gc) {
      float* out = p.data.data() + (size_t(gr) * size_t(p.cols) + size_t(gc)) * size_t(p.patch_dim);
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          for (int c = 0; c < 3; ++c) {
            double v = rescaled(img.at(gc * size + x, gr * size + y)[c]);
            if (normalize) v = (v - 0.5) / 0.5;
            const size_t at = channel_first ? (size_t(c) * size + size_t(y)) * size + size_t(x)
                                            : (size_t(y) * size + size_t(x)) * 3 + size_t(c);
            out[at] = float(v);
          }
    }
  return p;
}

// max |a - b| over max |b|: the fast path against the reference.
double relative_max_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

void expect_rows_match(const MediaRows& fast, const MediaEmbeddings& reference, int hidden, const std::string& what) {
  ASSERT_EQ(fast.rows, reference.rows) << what;
  ASSERT_EQ(fast.hidden, hidden) << what;
  ASSERT_EQ(fast.data.size(), reference.data.size()) << what;
  const double err = relative_max_error(fast.data, reference.data);
  EXPECT_LT(err, 1e-4) << what;
  ::testing::Test::RecordProperty(what, std::to_string(err));
}

std::vector<std::string> sources() { return {kDemoPng, kPipeline + "/demo.jpg"}; }
std::string resized_name(const std::string& source, const std::string& suffix) {
  return kPipeline + "/" + std::filesystem::path(source).filename().string() + suffix;
}

// 16-bit PCM mono WAV, written by hand (the format is the contract).
void write_wav(const std::string& path, const std::vector<int16_t>& samples, int rate) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t bytes = uint32_t(samples.size() * 2);
  out.write("RIFF", 4), u32(36 + bytes), out.write("WAVE", 4);
  out.write("fmt ", 4), u32(16), u16(1), u16(1), u32(uint32_t(rate)), u32(uint32_t(rate) * 2), u16(2), u16(16);
  out.write("data", 4), u32(bytes);
  out.write(reinterpret_cast<const char*>(samples.data()), std::streamsize(bytes));
}

std::vector<int16_t> test_samples(size_t n) {
  std::vector<int16_t> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = int16_t(std::lround(12000.0 * std::sin(0.05 * double(i)) + 3000.0 * std::sin(0.7 * double(i))));
  return s;
}

std::string tokens_line(const std::string& output) {
  const size_t at = output.find("[0] tokens:");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

void expect_fails_with(const std::string& args, std::initializer_list<const char*> fragments) {
  const test::CommandResult r = test::run_splitdec(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
  for (const char* f : fragments) EXPECT_NE(r.output.find(f), std::string::npos) << "'" << f << "' not in: " << r.output;
  // One line, no abort, no sanitizer report.
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace

TEST(MediaPipeline, Gemma3ImageMatchesAnIndependentRebuildOfHf) {
  const Frontend f = load_frontend("tiny-gemma3");
  ASSERT_EQ(f.config.vision, VisionFrontend::Siglip);
  const auto engine = Engine::load(test::tiny_model_dir("tiny-gemma3"));
  for (const std::string& src : sources()) {
    const RgbImage pil = read_image_file(resized_name(src, ".siglip112.png"));
    ASSERT_EQ(pil.width, f.config.siglip.image_size);
    const ImagePatches patches = cut_patches(pil, f.config.siglip.patch, true, true);
    const MediaEmbeddings expected = reference_siglip(f.config.siglip, f.weights.siglip, patches);
    expect_rows_match(engine->embed_media(src, Modality::Image), expected, engine->hidden_size(), src + " gemma3");
  }
}

TEST(MediaPipeline, Gemma4EncoderAndUnifiedImagesMatchAnIndependentRebuildOfHf) {
  for (const char* preset : {"tiny-gemma4", "tiny-gemma4-unified"}) {
    const Frontend f = load_frontend(preset);
    const auto engine = Engine::load(test::tiny_model_dir(preset));
    for (const std::string& src : sources()) {
      const RgbImage pil = read_image_file(resized_name(src, ".gemma4_70.png"));
      MediaEmbeddings expected;
      if (f.config.vision == VisionFrontend::Gemma4Encoder) {
        expected = reference_gemma4_vision(f.config.gemma4, f.weights.gemma4, cut_patches(pil, f.config.gemma4.patch, false, false));
      } else {
        ASSERT_EQ(f.config.vision, VisionFrontend::UnifiedPatches);
        expected = reference_unified_image(f.config.unified, f.weights.unified, cut_patches(pil, f.config.unified.patch, false, false));
      }
      // 432 x 336 at budget 70: 9 x 7 tokens of 48 px.
      EXPECT_EQ(expected.rows, 63) << preset;
      expect_rows_match(engine->embed_media(src, Modality::Image, MediaOptions{70}), expected, engine->hidden_size(),
                        src + " " + preset);
    }
  }
}

// MediaOptions::progress hears each tower layer of each file (for the
// CLI's progress line), and listening changes no row.
TEST(MediaPipeline, TowersReportProgressPerLayer) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const auto engine = Engine::load(test::tiny_model_dir(preset));
    const std::string src = sources().front();
    std::vector<std::pair<int, int>> calls;
    MediaOptions heard{.image_tokens = std::string(preset) == "tiny-gemma4" ? 70 : 0, .pan_and_scan = false, .progress = {}};
    const MediaOptions quiet = heard;
    heard.progress = [&](const std::string& file, int done, int total) {
      EXPECT_EQ(file, src);
      calls.emplace_back(done, total);
    };
    const MediaRows with = engine->embed_media(src, Modality::Image, heard);
    const MediaRows without = engine->embed_media(src, Modality::Image, quiet);
    EXPECT_EQ(with.data, without.data) << preset;
    ASSERT_GE(calls.size(), 2u) << preset;
    const int layers = calls.front().second;
    ASSERT_EQ(calls.size(), size_t(layers) + 1) << preset;
    for (int k = 0; k <= layers; ++k) EXPECT_EQ(calls[size_t(k)], std::make_pair(k, layers)) << preset;
  }
}

TEST(MediaPipeline, UnifiedAudioFromAWavFile) {
  const Frontend f = load_frontend("tiny-gemma4-unified");
  ASSERT_EQ(f.config.audio, AudioFrontend::RawFrames);
  const std::string dir = test::temp_dir("media-audio");
  const std::vector<int16_t> pcm = test_samples(1500);  // 3 frames of 640, the last padded
  write_wav(dir + "/clip.wav", pcm, 16000);
  AudioClip clip;
  for (int16_t s : pcm) clip.samples.push_back(float(s) / 32768.f);
  const MediaEmbeddings expected = reference_unified_audio(f.config.audio_shape, f.weights.audio_projection, clip);
  EXPECT_EQ(expected.rows, 3);
  const auto engine = Engine::load(test::tiny_model_dir("tiny-gemma4-unified"));
  expect_rows_match(engine->embed_media(dir + "/clip.wav", Modality::Audio), expected, engine->hidden_size(), "wav");
}

// The rows of an image are what its block holds: generating with the PNG
// and with the rows embed-media wrote for it gives the same tokens, under
// every plan, and the trace shows the image's chunk on the masked path.
TEST(MediaPipeline, GenerateWithAnImageFileUnderEveryPlan) {
  const std::string work = test::temp_dir("media-generate");
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4", "tiny-gemma4-unified"}) {
    const std::string dir = test::tiny_model_dir(preset);
    const std::string budget = std::string(preset) == "tiny-gemma3" ? "" : " --image-tokens 70";
    const std::string rows = work + "/" + preset + ".npy";
    auto r = test::run_splitdec("embed-media --model " + dir + " --image " + kDemoPng + budget + " --out " + rows);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const NpyArray npy = read_npy(rows);
    ASSERT_EQ(npy.shape.size(), 2u);
    EXPECT_EQ(npy.shape[0], std::string(preset) == "tiny-gemma3" ? 16 : 63) << preset;
    std::string first;
    for (const char* plan : {"reference", "single", "split", "split-copy", "unified"}) {
      r = test::run_splitdec("generate --model " + dir + " --chat --image " + kDemoPng + budget +
                             " --prompt 'What is in this picture?' --max-new-tokens 4 --plan " + plan + " --trace");
      ASSERT_EQ(r.exit_code, 0) << preset << " " << plan << "\n" << r.output;
      if (first.empty()) first = tokens_line(r.output);
      EXPECT_EQ(tokens_line(r.output), first) << preset << " " << plan;
      if (std::string(plan) == "split") {
        EXPECT_NE(r.output.find("path masked"), std::string::npos) << r.output;
      }
    }
    ASSERT_FALSE(first.empty());
    r = test::run_splitdec("generate --model " + dir + " --chat --image " + rows +
                           " --prompt 'What is in this picture?' --max-new-tokens 4");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(tokens_line(r.output), first) << preset << ": the embeddings file and the PNG differ";
    // The <image:FILE> shorthand reads image files too.
    r = test::run_splitdec("generate --model " + dir + " --prompt 'Look: <image:" + kDemoPng + "> ok'" + budget +
                           " --max-new-tokens 2");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

TEST(MediaPipeline, AudioFileThroughTheChatTemplate) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4-unified");
  const std::string work = test::temp_dir("media-chat-audio");
  write_wav(work + "/clip.wav", test_samples(3000), 16000);
  const auto r = test::run_splitdec("tokenize --model " + dir + " --chat --audio " + work + "/clip.wav --prompt 'Transcribe'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  int audio_tokens = 0;
  for (const auto& p : j["pieces"]) audio_tokens += p.get<std::string>() == "<|audio|>";
  EXPECT_EQ(audio_tokens, 5);  // ceil(3000 / 640)
  // tokenize counts an image's tokens without the towers: 9 x 7 at budget 70.
  const auto t = test::run_splitdec("tokenize --model " + dir + " --chat --image " + kDemoPng + " --image-tokens 70 --prompt 'What?'");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto ti = nlohmann::json::parse(t.output.substr(t.output.find('{')));
  int image_tokens = 0;
  for (const auto& p : ti["pieces"]) image_tokens += p.get<std::string>() == "<|image|>";
  EXPECT_EQ(image_tokens, 63);
  const auto g = test::run_splitdec("generate --model " + dir + " --chat --audio " + work + "/clip.wav --prompt 'Transcribe' --max-new-tokens 3");
  EXPECT_EQ(g.exit_code, 0) << g.output;
}

TEST(MediaPipeline, ApiConversationAppendsAnImageFile) {
  const auto engine = Engine::load(test::tiny_model_dir("tiny-gemma4-unified"));
  ConversationOptions o;
  o.media.image_tokens = 70;
  Conversation c(engine, o);
  c.append_image(kDemoPng);
  c.append_user_turn("What is in this picture?");
  GenerateOptions g;
  g.max_new_tokens = 3;
  c.generate(g, nullptr);
  EXPECT_EQ(c.last_reply().tokens.size(), 3u);
  EXPECT_NE(engine->describe_media().find("patch embedder"), std::string::npos) << engine->describe_media();
}

TEST(MediaPipeline, BadMediaAreOneLineErrors) {
  const std::string work = test::temp_dir("media-bad");
  const std::string g3 = test::tiny_model_dir("tiny-gemma3"), g4 = test::tiny_model_dir("tiny-gemma4");
  const std::string png = test::read_file(kDemoPng);
  test::write_file(work + "/truncated.png", png.substr(0, png.size() / 2));
  test::write_file(work + "/notes.txt", "not a picture at all\n");
  write_wav(work + "/clip500hz.wav", test_samples(4410), 500);
  write_wav(work + "/clip.wav", test_samples(1000), 16000);
  const std::string ask = " --chat --prompt 'What?' --max-new-tokens 2";
  expect_fails_with("generate --model " + g3 + " --image " + work + "/truncated.png" + ask, {"truncated.png"});
  expect_fails_with("generate --model " + g3 + " --image " + work + "/notes.txt" + ask, {"notes.txt", "PNG"});
  expect_fails_with("generate --model " + g4 + " --image " + kDemoPng + " --image-tokens 100" + ask, {"100", "280"});
  expect_fails_with("generate --model " + g3 + " --image " + kDemoPng + " --image-tokens 70" + ask, {"70", "16"});
  // tiny-gemma4 has no audio_config (its audio is embeddings files only); Gemma-3 has no audio frontend.
  expect_fails_with("generate --model " + g4 + " --audio " + work + "/clip.wav" + ask, {"clip.wav", "audio"});
  expect_fails_with("embed-media --model " + test::tiny_model_dir("tiny-gemma4-unified") + " --audio " + work +
                        "/clip500hz.wav --out " + work + "/x.npy",
                    {"clip500hz.wav", "500 Hz", "1000 to 768000"});
  // 44.1 kHz is resampled: 4410 samples are 1600 at 16 kHz, 3 frames of 640.
  write_wav(work + "/clip44k.wav", test_samples(4410), 44100);
  const auto ok = test::run_splitdec("embed-media --model " + test::tiny_model_dir("tiny-gemma4-unified") + " --audio " +
                                     work + "/clip44k.wav --out " + work + "/x.npy");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("3 rows of 64"), std::string::npos) << ok.output;
  expect_fails_with("embed-media --model " + g3 + " --audio " + kDemoPng + " --out " + work + "/x.npy", {"image"});
  expect_fails_with("embed-media --model " + g3 + " --image " + work + "/missing.png --out " + work + "/x.npy",
                    {"missing.png"});
}

// A decoder-only folder of a multimodal model (no tower tensors): images
// must come as embeddings, and the error says so.
TEST(MediaPipeline, DecoderOnlyCheckpointRefusesImageFiles) {
  const std::string src = test::tiny_model_dir("tiny-gemma3");
  const std::string dir = test::temp_dir("media-decoder-only");
  for (const auto& e : std::filesystem::directory_iterator(src))
    if (e.path().filename() != "model.safetensors") std::filesystem::copy(e.path(), dir + "/" + e.path().filename().string());
  const TensorStore store = TensorStore::open_dir(src);
  std::vector<TensorToWrite> keep;
  for (const auto& [name, v] : store.tensors()) {
    if (name.find("vision_tower") != std::string::npos || name.find("multi_modal_projector") != std::string::npos) continue;
    keep.push_back({name, v.dtype, v.shape, std::vector<uint8_t>(v.data, v.data + v.nbytes)});
  }
  write_safetensors(dir + "/model.safetensors", keep, {{"format", "pt"}});
  expect_fails_with("generate --model " + dir + " --image " + kDemoPng + " --chat --prompt 'What?' --max-new-tokens 2",
                    {"demo.png", "not in the checkpoint", ".npy"});
  const auto r = test::run_splitdec("generate --model " + dir + " --image " + dir + "/demo_image.npy --chat --prompt 'What?' --max-new-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
