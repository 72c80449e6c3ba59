// Image and audio files against what Hugging Face's Python pipeline sees.
// The images and PIL's decoding of each (ImageOps.exif_transpose, then
// convert("RGB")) come from scripts/make_media_test_data.py; every one must
// match byte for byte. Audio samples must be exact. Hostile input (truncated,
// oversized, mislabelled and randomly mutated files) must end in a
// splitdec::Error and nothing else.
#include "media/audio_file.h"
#include "media/audio_resample.h"
#include "media/image_file.h"

#include <gtest/gtest.h>
#include <sndfile.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>  // before jpeglib.h, which needs FILE
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace splitdec {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

const fs::path kFiles = fs::path(MEDIA_TEST_DATA) / "files";

Bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

const nlohmann::json& manifest() {
  static const nlohmann::json m = [] {
    std::ifstream in(kFiles / "manifest.json");
    return nlohmann::json::parse(in);
  }();
  return m;
}

Bytes image_file(const std::string& name) {
  for (const auto& e : manifest()["images"])
    if (e["name"] == name) return read_bytes(kFiles / e["file"].get<std::string>());
  ADD_FAILURE() << "no test image " << name;
  return {};
}

// A private directory for files the tests write, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "splitdec_media_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Runs f, which must throw an Error of type E whose message contains every
// one of `parts`.
template <class E>
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const E& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong exception type: " << e.what();
  }
}

// ---------------------------------------------------------------- PNG helpers

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_u32(Bytes& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}

void put_chunk(Bytes& out, const char* kind, const Bytes& body) {
  put_u32(out, uint32_t(body.size()));
  Bytes typed(kind, kind + 4);
  typed.insert(typed.end(), body.begin(), body.end());
  out.insert(out.end(), typed.begin(), typed.end());
  put_u32(out, crc32(typed.data(), typed.size()));
}

// A PNG with a valid IHDR for (width, height), a tiny IDAT that cannot hold
// the image, and IEND.
Bytes png_with_header(uint32_t width, uint32_t height) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put_u32(ihdr, width);
  put_u32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", {0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01});
  put_chunk(out, "IEND", {});
  return out;
}

// Offsets of the chunk whose type is `kind`: {start of data, length}.
std::pair<size_t, size_t> find_chunk(const Bytes& png, const char* kind) {
  for (size_t pos = 8; pos + 12 <= png.size();) {
    const size_t len = size_t(png[pos]) << 24 | size_t(png[pos + 1]) << 16 | size_t(png[pos + 2]) << 8 | png[pos + 3];
    if (std::memcmp(&png[pos + 4], kind, 4) == 0) return {pos + 8, len};
    pos += 12 + len;
  }
  return {0, 0};
}

// Recomputes every chunk's CRC, so mutations reach past libpng's CRC check.
void fix_png_crcs(Bytes& png) {
  for (size_t pos = 8; pos + 12 <= png.size();) {
    const uint64_t len = uint64_t(png[pos]) << 24 | uint64_t(png[pos + 1]) << 16 | uint64_t(png[pos + 2]) << 8 | png[pos + 3];
    if (pos + 12 + len > png.size()) return;
    const uint32_t crc = crc32(&png[pos + 4], size_t(len) + 4);
    for (int k = 0; k < 4; ++k) png[pos + 8 + size_t(len) + size_t(k)] = uint8_t(crc >> (24 - 8 * k));
    pos += 12 + size_t(len);
  }
}

// ---------------------------------------------------------------- images: PIL parity

TEST(ImageFiles, EveryTestImageEqualsPilByteForByte) {
  const auto& images = manifest()["images"];
  ASSERT_GE(images.size(), 50u);
  for (const auto& e : images) {
    const std::string name = e["name"];
    SCOPED_TRACE(name);
    const int width = e["width"], height = e["height"];
    const Bytes expected = read_bytes(kFiles / e["rgb"].get<std::string>());
    ASSERT_EQ(expected.size(), size_t(width) * height * 3);
    const RgbImage image = read_image_file((kFiles / e["file"].get<std::string>()).string());
    ASSERT_EQ(image.width, width);
    ASSERT_EQ(image.height, height);
    ASSERT_EQ(image.pixels.size(), expected.size());
    size_t mismatches = 0, first = 0;
    int max_diff = 0;
    for (size_t i = 0; i < expected.size(); ++i)
      if (image.pixels[i] != expected[i]) {
        if (mismatches++ == 0) first = i;
        max_diff = std::max(max_diff, std::abs(int(image.pixels[i]) - int(expected[i])));
      }
    EXPECT_EQ(mismatches, 0u) << "first at byte " << first << " (pixel " << first / 3 % width << ", "
                              << first / 3 / width << "), max difference " << max_diff;
  }
}

TEST(ImageFiles, MemoryAndFileDecodingAgree) {
  for (const char* name : {"png_rgb8", "jpeg_exif6", "png_exif6"}) {
    const auto& images = manifest()["images"];
    for (const auto& e : images) {
      if (e["name"] != name) continue;
      const std::string path = (kFiles / e["file"].get<std::string>()).string();
      const Bytes bytes = read_bytes(path);
      const RgbImage a = read_image_file(path), b = decode_image(bytes.data(), bytes.size(), name);
      EXPECT_EQ(a.width, b.width);
      EXPECT_EQ(a.pixels, b.pixels) << name;
    }
  }
}

// The manifest must exercise what the decoder promises; a regenerated data
// set that lost a case would otherwise pass silently.
TEST(ImageFiles, TheDataCoversEveryPromisedCase) {
  std::vector<std::string> names;
  for (const auto& e : manifest()["images"]) names.push_back(e["name"]);
  for (const char* needed :
       {"png_rgb8", "png_gray8", "png_palette8", "png_gray_alpha8", "png_rgba8", "png_rgb16", "png_gray16",
        "png_palette8_trns", "png_rgb8_interlaced", "png_palette8_short_plte", "png_exif6", "png_exif3_after_idat",
        "png_xmp5", "png_raw_profile_exif8", "jpeg_420", "jpeg_444", "jpeg_420_progressive", "jpeg_gray", "jpeg_cmyk",
        "jpeg_exif1", "jpeg_exif2", "jpeg_exif3", "jpeg_exif4", "jpeg_exif5", "jpeg_exif6", "jpeg_exif7", "jpeg_exif8"})
    EXPECT_NE(std::find(names.begin(), names.end(), needed), names.end()) << needed;
}

TEST(ImageFiles, LooksLikeImage) {
  const Bytes png = image_file("png_rgb8"), jpeg = image_file("jpeg_420");
  EXPECT_TRUE(looks_like_image(png.data(), png.size()));
  EXPECT_TRUE(looks_like_image(jpeg.data(), jpeg.size()));
  EXPECT_TRUE(looks_like_image(png.data(), 8));
  EXPECT_FALSE(looks_like_image(png.data(), 7));
  EXPECT_FALSE(looks_like_image(jpeg.data(), 2));
  const std::string gif = "GIF89a\x01\x00\x01\x00";
  EXPECT_FALSE(looks_like_image(reinterpret_cast<const uint8_t*>(gif.data()), gif.size()));
  EXPECT_FALSE(looks_like_image(nullptr, 0));
}

// ---------------------------------------------------------------- images: errors

TEST(ImageErrors, TruncatedJpegIsAnErrorNamingTheFile) {
  for (const char* name : {"jpeg_420", "jpeg_444", "jpeg_420_progressive", "jpeg_gray", "jpeg_cmyk", "jpeg_exif6"}) {
    const Bytes full = image_file(name);
    // PIL raises "image file is truncated" at every one of these, even when
    // only the final EOI marker is missing.
    for (double fraction : {0.05, 0.2, 0.4, 0.6, 0.8, 0.95}) {
      const size_t cut = size_t(double(full.size()) * fraction);
      expect_error<FormatError>([&] { decode_image(full.data(), cut, "cut.jpg"); }, {"cut.jpg", "JPEG"},
                                std::string(name) + " cut at " + std::to_string(cut));
    }
    for (size_t missing : {1, 2})
      expect_error<FormatError>([&] { decode_image(full.data(), full.size() - missing, "cut.jpg"); },
                                {"cut.jpg", "truncated"}, std::string(name) + " without its last bytes");
  }
}

TEST(ImageErrors, TruncatedPngIsAnErrorNamingTheFile) {
  for (const char* name : {"png_rgb8", "png_rgb8_interlaced", "png_palette8", "png_gray16", "png_rgb8_multi_idat"}) {
    const Bytes full = image_file(name);
    for (size_t cut : {size_t(8), size_t(20), size_t(32)})
      expect_error<FormatError>([&] { decode_image(full.data(), cut, "cut.png"); }, {"cut.png", "PNG"},
                                std::string(name) + " cut at " + std::to_string(cut));
    const auto [idat, length] = find_chunk(full, "IDAT");
    ASSERT_GT(length, 0u);
    for (double fraction : {0.0, 0.1, 0.5, 0.9}) {
      const size_t cut = idat + size_t(double(length) * fraction);
      expect_error<FormatError>([&] { decode_image(full.data(), cut, "cut.png"); }, {"cut.png", "PNG"},
                                std::string(name) + " cut in its IDAT at " + std::to_string(cut));
    }
  }
  // A PNG that lacks only part of IEND decodes in PIL, and here.
  const Bytes full = image_file("png_rgb8");
  const RgbImage whole = decode_image(full.data(), full.size(), "whole.png");
  const RgbImage cut = decode_image(full.data(), full.size() - 3, "cut.png");
  EXPECT_EQ(whole.pixels, cut.pixels);
}

TEST(ImageErrors, ZeroSizePngHeader) {
  for (auto [w, h] : {std::pair<uint32_t, uint32_t>{0, 5}, {5, 0}, {0, 0}}) {
    const Bytes png = png_with_header(w, h);
    expect_error<FormatError>([&] { decode_image(png.data(), png.size(), "zero.png"); }, {"zero.png", "zero-size"},
                              "zero-size PNG");
  }
}

TEST(ImageErrors, HugePngHeaderIsRefusedBeforeDecoding) {
  const Bytes png = png_with_header(30000, 30000);
  expect_error<InputError>([&] { decode_image(png.data(), png.size(), "huge.png"); },
                           {"huge.png", "30000 x 30000", "900000000", "134217728", "kMaxImagePixels"}, "30000x30000 PNG");
  // Under the pixel limit, yet far more than a 70-byte file can inflate to:
  // refused before the pixel buffer is allocated.
  const Bytes big = png_with_header(16384, 8192);
  expect_error<FormatError>([&] { decode_image(big.data(), big.size(), "big.png"); }, {"big.png", "truncated or corrupt"},
                            "16384x8192 PNG of 70 bytes");
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(ImageErrors, ChunkClaimingGigabytesCostsNothing) {
  // A zTXt chunk claiming 2 GB, before and after the image. libpng would
  // allocate and clear the claimed length before finding the file short.
  const Bytes png = image_file("png_rgb8");
  const auto [idat, length] = find_chunk(png, "IDAT");
  const size_t after_idat = idat + length + 4;
  Bytes liar;
  put_u32(liar, 0x7F000000u);
  liar.insert(liar.end(), {'z', 'T', 'X', 't', 'k', 'e', 'y', 0, 0, 0x78, 0x9c});
  Bytes early(png.begin(), png.begin() + 33), late(png.begin(), png.begin() + long(after_idat));
  early.insert(early.end(), liar.begin(), liar.end());
  early.insert(early.end(), png.begin() + 33, png.end());
  late.insert(late.end(), liar.begin(), liar.end());
  const long before = peak_rss_kib();
  expect_error<FormatError>([&] { decode_image(early.data(), early.size(), "early.png"); }, {"early.png", "truncated"},
                            "2 GB zTXt before IDAT");
  // After the image, the tail is only metadata: PIL reads the image, and so does this.
  EXPECT_EQ(decode_image(late.data(), late.size(), "late.png").pixels, decode_image(png.data(), png.size(), "png").pixels);
  EXPECT_LT(peak_rss_kib() - before, 256 * 1024) << "peak RSS grew by " << (peak_rss_kib() - before) << " KiB";
}

TEST(ImageErrors, HugeJpegHeaderIsRefused) {
  // 60000 x 60000 (libjpeg's own limit is 65500 a side).
  Bytes jpeg = image_file("jpeg_420");
  bool patched = false;
  for (size_t i = 2; i + 9 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {  // SOF0: length(2) precision(1) height(2) width(2)
      jpeg[i + 5] = jpeg[i + 7] = 60000 >> 8;
      jpeg[i + 6] = jpeg[i + 8] = 60000 & 0xFF;
      patched = true;
      break;
    }
  ASSERT_TRUE(patched);
  expect_error<InputError>([&] { decode_image(jpeg.data(), jpeg.size(), "huge.jpg"); },
                           {"huge.jpg", "60000 x 60000", "kMaxImagePixels"}, "60000x60000 JPEG");
}

TEST(ImageErrors, LargeJpegClaimInASmallFileCostsLittle) {
  // 12000 x 11000 is under the pixel limit; the 1.5 kB of baseline data run
  // out after a few rows, and only those rows may cost memory.
  Bytes jpeg = image_file("jpeg_420");
  for (size_t i = 2; i + 9 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 5] = 11000 >> 8, jpeg[i + 6] = 11000 & 0xFF;  // height
      jpeg[i + 7] = 12000 >> 8, jpeg[i + 8] = 12000 & 0xFF;  // width
      break;
    }
  const long before = peak_rss_kib();
  expect_error<FormatError>([&] { decode_image(jpeg.data(), jpeg.size(), "claim.jpg"); }, {"claim.jpg", "JPEG"},
                            "12000x11000 claim in 1.5 kB");
  EXPECT_LT(peak_rss_kib() - before, 128 * 1024) << "peak RSS grew by " << (peak_rss_kib() - before) << " KiB";
}

// A valid progressive gray JPEG whose scan script refines every coefficient
// bit by bit: 11 scans per coefficient, 704 in all.
Bytes jpeg_with_many_scans() {
  constexpr int kSide = 16;
  std::vector<jpeg_scan_info> scans;
  auto scan = [&](int ss, int se, int ah, int al) { scans.push_back(jpeg_scan_info{1, {0, 0, 0, 0}, ss, se, ah, al}); };
  scan(0, 0, 0, 10);
  for (int al = 9; al >= 0; --al) scan(0, 0, al + 1, al);
  for (int k = 1; k < 64; ++k) {
    scan(k, k, 0, 10);
    for (int al = 9; al >= 0; --al) scan(k, k, al + 1, al);
  }
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = c.image_height = kSide;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  c.scan_info = scans.data();
  c.num_scans = int(scans.size());
  jpeg_start_compress(&c, TRUE);
  std::vector<JSAMPLE> row(kSide);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < kSide; ++x) row[size_t(x)] = JSAMPLE((x * 37 + c.next_scanline * 11) & 0xFF);
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  Bytes bytes(out, out + size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

TEST(ImageErrors, JpegWithTooManyScansIsRefused) {
  const Bytes jpeg = jpeg_with_many_scans();
  expect_error<InputError>([&] { decode_image(jpeg.data(), jpeg.size(), "scans.jpg"); },
                           {"scans.jpg", "more than 500 progressive scans", "kMaxJpegScans"}, "704-scan JPEG");
}

TEST(ImageErrors, OtherFormatsAreNamed) {
  struct Case {
    std::string bytes;
    const char* found;
  };
  const std::vector<Case> cases = {
      {"GIF89a\x10\x00\x10\x00\x80\x00\x00", "GIF"},
      {std::string("BM\x36\x00\x00\x00\x00\x00", 8), "BMP"},
      {std::string("RIFF\x24\x00\x00\x00WEBPVP8 ", 16), "WebP"},
      {"a caption, not a picture\n", "text"},
      {std::string("\x00\x01\x02\x03\x04\x05\x06\x07", 8), "00 01 02"},
      {std::string("\x89PNX\r\n\x1a\n", 8), "unknown data"},
      {"", "empty"},
  };
  for (const auto& c : cases)
    expect_error<InputError>(
        [&] { decode_image(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size(), "odd.bin"); },
        {"odd.bin", "not a PNG or JPEG", c.found}, c.found);
  TempDir dir;
  const fs::path text = dir.path / "notes.png";
  write_bytes(text, Bytes{'h', 'e', 'l', 'l', 'o', '\n'});
  expect_error<InputError>([&] { read_image_file(text.string()); }, {"notes.png", "text"}, "text file named .png");
  expect_error<InputError>([&] { read_image_file((dir.path / "missing.png").string()); }, {"missing.png", "cannot open"},
                           "missing file");
  expect_error<InputError>([&] { read_image_file(dir.path.string()); }, {"cannot read"}, "a directory");
}

TEST(ImageErrors, CorruptPngChunks) {
  // A flipped bit in IHDR: libpng's CRC check names the chunk.
  Bytes png = image_file("png_rgb8");
  png[18] ^= 0x01;
  expect_error<FormatError>([&] { decode_image(png.data(), png.size(), "bad.png"); }, {"bad.png", "PNG"}, "IHDR bit flip");
  // Garbage in the deflate stream with valid CRCs.
  png = image_file("png_rgb8");
  const auto [idat, length] = find_chunk(png, "IDAT");
  for (size_t i = 2; i < 40 && i < length; ++i) png[idat + i] = uint8_t(0xA5 ^ i);
  fix_png_crcs(png);
  expect_error<FormatError>([&] { decode_image(png.data(), png.size(), "bad.png"); }, {"bad.png", "PNG"}, "bad deflate");
}

// ---------------------------------------------------------------- audio

const nlohmann::json& audio_case(const std::string& file) {
  for (const auto& e : manifest()["audio"])
    if (e["file"] == file) return e;
  throw std::runtime_error("no audio case " + file);
}

// What soundfile/librosa give: ints scaled by 2^-(bits-1), channels averaged.
std::vector<float> expected_mono(const nlohmann::json& e) {
  const int channels = e["channels"];
  const std::string encoding = e["encoding"];
  std::vector<float> values;
  for (const auto& v : e["samples"]) {
    if (encoding == "float32") {
      values.push_back(v.get<float>());
    } else {
      const int bits = std::stoi(encoding.substr(3));
      values.push_back(float(double(v.get<int64_t>()) / double(int64_t(1) << (bits - 1))));
    }
  }
  std::vector<float> mono;
  for (size_t i = 0; i + size_t(channels) <= values.size(); i += size_t(channels)) {
    float sum = values[i];
    for (int c = 1; c < channels; ++c) sum += values[i + size_t(c)];
    mono.push_back(channels == 1 ? sum : sum / float(channels));
  }
  return mono;
}

TEST(AudioFiles, WavSamplesAreExact) {
  for (const char* file : {"wav_mono16.wav", "wav_stereo16.wav", "wav_3ch16.wav", "wav_mono24.wav", "wav_mono32.wav",
                           "wav_float32.wav"}) {
    SCOPED_TRACE(file);
    const auto& e = audio_case(file);
    const std::vector<float> expected = expected_mono(e);
    ASSERT_FALSE(expected.empty());
    const AudioClip clip = read_audio_file((kFiles / file).string());
    EXPECT_EQ(clip.sample_rate, 16000);
    ASSERT_EQ(clip.samples.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(clip.samples[i], expected[i]) << "sample " << i;
  }
  // The edge values, spelled out: 16-bit PCM is sample / 32768.
  const AudioClip clip = read_audio_file((kFiles / "wav_mono16.wav").string());
  EXPECT_EQ(clip.samples[0], -1.0f);
  EXPECT_EQ(clip.samples[1], 32767.0f / 32768.0f);
  EXPECT_EQ(clip.samples[3], 1.0f / 32768.0f);
}

TEST(AudioFiles, FlacWrittenByLibsndfileReadsBackExactly) {
  TempDir dir;
  for (int bits : {16, 24}) {
    SCOPED_TRACE(bits);
    const fs::path path = dir.path / ("clip" + std::to_string(bits) + ".flac");
    const int channels = 2, frames = 300;
    std::vector<int32_t> samples(size_t(frames) * channels);
    std::mt19937 rng(bits);
    const int32_t top = (int32_t(1) << (bits - 1)) - 1;
    for (auto& s : samples) s = int32_t(rng() % uint32_t(2 * top + 1)) - top;
    samples[0] = -top - 1;
    samples[1] = top;
    {
      SF_INFO info{};
      info.samplerate = 16000;
      info.channels = channels;
      info.format = SF_FORMAT_FLAC | (bits == 16 ? SF_FORMAT_PCM_16 : SF_FORMAT_PCM_24);
      SNDFILE* out = sf_open(path.c_str(), SFM_WRITE, &info);
      ASSERT_NE(out, nullptr) << sf_strerror(nullptr);
      // sf_write_int takes 32-bit ints, left-aligned.
      std::vector<int> aligned(samples.size());
      for (size_t i = 0; i < samples.size(); ++i) aligned[i] = int(uint32_t(samples[i]) << (32 - bits));
      ASSERT_EQ(sf_writef_int(out, aligned.data(), frames), frames);
      sf_close(out);
    }
    const AudioClip clip = read_audio_file(path.string());
    ASSERT_EQ(clip.samples.size(), size_t(frames));
    const float scale = 1.0f / float(int64_t(1) << (bits - 1));
    for (int i = 0; i < frames; ++i) {
      const float expected = (float(samples[size_t(2 * i)]) * scale + float(samples[size_t(2 * i + 1)]) * scale) / 2.0f;
      ASSERT_EQ(clip.samples[size_t(i)], expected) << "frame " << i;
    }
  }
}

TEST(AudioFiles, LooksLikeAudio) {
  auto looks = [](const std::string& s) {
    return looks_like_audio(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_TRUE(looks(std::string("RIFF\x10\x00\x00\x00WAVEfmt ", 16)));
  EXPECT_TRUE(looks(std::string("RIFX\x00\x00\x00\x10WAVE", 12)));
  EXPECT_TRUE(looks(std::string("RF64\xff\xff\xff\xffWAVE", 12)));
  EXPECT_TRUE(looks("fLaC\x00\x00\x00\x22"));
  EXPECT_FALSE(looks(std::string("RIFF\x10\x00\x00\x00WEBP", 12)));
  EXPECT_FALSE(looks(std::string("RIFF\x10\x00\x00\x00WAV", 11)));
  EXPECT_FALSE(looks("ID3\x04"));
  EXPECT_FALSE(looks(""));
  const Bytes wav = read_bytes(kFiles / "wav_mono16.wav");
  EXPECT_TRUE(looks_like_audio(wav.data(), wav.size()));
}

// A 44.1 kHz file is its exact samples (as the manifest gives them) through
// the resampler, at librosa's length ceil(n * 16000 / 44100).
TEST(AudioFiles, OtherRatesAreResampledTo16kHz) {
  const std::vector<float> at_44k = expected_mono(audio_case("wav_mono16_44k.wav"));
  const AudioClip clip = read_audio_file((kFiles / "wav_mono16_44k.wav").string());
  EXPECT_EQ(clip.sample_rate, 16000);
  EXPECT_EQ(int64_t(clip.samples.size()), (int64_t(at_44k.size()) * 16000 + 44099) / 44100);
  AudioResampler r(44100, 16000);
  std::vector<float> expected;
  r.push(at_44k.data(), at_44k.size(), expected);
  r.finish(expected);
  ASSERT_EQ(clip.samples.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(clip.samples[i], expected[i]) << "sample " << i;
}

namespace {
// 0.5 sin(2 pi 440 t) + 0.3 sin(2 pi 3000 t + 1) + loud, for `seconds` at `rate`.
std::vector<float> two_tones(int rate, double seconds, double loud_hz = 0) {
  std::vector<float> x(size_t(rate * seconds));
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = double(i) / rate;
    x[i] = float(0.5 * std::sin(2 * M_PI * 440 * t) + 0.3 * std::sin(2 * M_PI * 3000 * t + 1) +
                 (loud_hz > 0 ? 0.4 * std::sin(2 * M_PI * loud_hz * t) : 0.0));
  }
  return x;
}
std::vector<float> resample(const std::vector<float>& x, int rate, size_t piece) {
  AudioResampler r(rate, 16000);
  std::vector<float> out;
  for (size_t i = 0; i < x.size(); i += piece) r.push(x.data() + i, std::min(piece, x.size() - i), out);
  r.finish(out);
  return out;
}
}  // namespace

// The resampler against the signal itself: two tones below 16 kHz's
// Nyquist, written at common rates, come out as the same tones sampled at
// 16 kHz (no delay, no gain: error < 1e-5, HQ being 20-bit, away from the ends); a tone above
// 8 kHz is filtered out; the result does not depend on how the input is cut
// into pushes; the length is librosa's.
TEST(AudioResample, TonesComeThroughAtEveryRateAndAliasesDoNot) {
  for (int rate : {8000, 11025, 22050, 32000, 44100, 48000, 96000}) {
    SCOPED_TRACE(rate);
    const std::vector<float> y = resample(two_tones(rate, 0.5), rate, 4096);
    ASSERT_EQ(int64_t(y.size()), AudioResampler::output_length(int64_t(rate * 0.5), rate, 16000));
    double worst = 0;
    for (size_t k = 400; k + 400 < y.size(); ++k) {
      const double t = double(k) / 16000;
      worst = std::max(worst, std::abs(y[k] - (0.5 * std::sin(2 * M_PI * 440 * t) + 0.3 * std::sin(2 * M_PI * 3000 * t + 1))));
    }
    EXPECT_LT(worst, 1e-5);
    if (rate >= 22050) {  // a 10 kHz tone is above the output's Nyquist: gone
      const std::vector<float> z = resample(two_tones(rate, 0.5, 10000), rate, 4096);
      double alias = 0;
      for (size_t k = 400; k + 400 < z.size(); ++k) alias = std::max(alias, double(std::abs(z[k] - y[k])));
      EXPECT_LT(alias, 1e-5);
    }
  }
  const std::vector<float> x = two_tones(44100, 0.3);
  const std::vector<float> whole = resample(x, 44100, x.size());
  for (size_t piece : {size_t(1), size_t(77), size_t(4096)}) EXPECT_EQ(resample(x, 44100, piece), whole) << piece;
}


TEST(AudioErrors, EmptyAudio) {
  expect_error<InputError>([] { read_audio_file((kFiles / "wav_empty16.wav").string()); }, {"wav_empty16.wav", "empty"},
                           "empty WAV");
}

// "fLaC" and one STREAMINFO block that gives `total_samples` (36 bits; 0
// means "unknown"), then no audio frames.
Bytes flac_header_only(uint64_t total_samples, int channels, uint32_t rate = 16000, int bits = 16) {
  Bytes b = {'f', 'L', 'a', 'C', 0x80 /* last block, STREAMINFO */, 0, 0, 34, 0x10, 0x00, 0x10, 0x00, 0, 0, 0, 0, 0, 0};
  const uint64_t packed = (uint64_t(rate) << 44) | (uint64_t(channels - 1) << 41) | (uint64_t(bits - 1) << 36) |
                          (total_samples & ((uint64_t(1) << 36) - 1));
  for (int k = 7; k >= 0; --k) b.push_back(uint8_t(packed >> (8 * k)));
  b.insert(b.end(), 16, 0);  // MD5: unset
  return b;
}

// A FLAC with no samples: STREAMINFO's total of 0 means "unknown", which
// libsndfile reports as 2^63-1 frames; that must read as "no audio samples",
// not as a file 9.6 billion years long.
TEST(AudioErrors, FlacWithNoSamples) {
  TempDir dir;
  for (const int channels : {1, 2}) {
    const fs::path path = dir.path / ("silence" + std::to_string(channels) + ".flac");
    write_bytes(path, flac_header_only(0, channels));
    expect_error<InputError>([&] { read_audio_file(path.string()); }, {"silence", ".flac", "no audio samples"},
                             "0-sample FLAC");
  }
  // Unknown length with frames behind it: read to the end, all of them.
  const fs::path unknown = dir.path / "unknown.flac";
  {
    SF_INFO info{};
    info.samplerate = 16000;
    info.channels = 1;
    info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    SNDFILE* out = sf_open(unknown.c_str(), SFM_WRITE, &info);
    ASSERT_NE(out, nullptr) << sf_strerror(nullptr);
    std::vector<short> ramp(300);
    for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = short(i);
    ASSERT_EQ(sf_writef_short(out, ramp.data(), 300), 300);
    sf_close(out);
  }
  {
    std::fstream f(unknown, std::ios::in | std::ios::out | std::ios::binary);
    char packed[8];
    f.seekg(18);
    f.read(packed, 8);
    packed[3] = char(packed[3] & 0xF0);  // the total's top 4 bits share a byte with bits per sample
    std::fill(packed + 4, packed + 8, char(0));
    f.seekp(18);
    f.write(packed, 8);
  }
  const AudioClip clip = read_audio_file(unknown.string());
  ASSERT_EQ(clip.samples.size(), 300u);
  EXPECT_EQ(clip.samples[299], 299.0f / 32768.0f);
  // A STREAMINFO claiming samples with no frames behind it: no samples either.
  const fs::path liar = dir.path / "liar.flac";
  write_bytes(liar, flac_header_only(1000, 1));
  expect_error<Error>([&] { read_audio_file(liar.string()); }, {"liar.flac"}, "frameless FLAC");
}

// A canonical 44-byte WAV header for `data_bytes` of PCM.
Bytes wav_header(uint32_t data_bytes, int bits, int channels = 1, uint32_t rate = 16000) {
  Bytes h;
  auto le32 = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) h.push_back(uint8_t(v >> (8 * k)));
  };
  auto le16 = [&](uint32_t v) {
    h.push_back(uint8_t(v));
    h.push_back(uint8_t(v >> 8));
  };
  h.insert(h.end(), {'R', 'I', 'F', 'F'});
  le32(36 + data_bytes);
  h.insert(h.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
  le32(16);
  le16(1);
  le16(uint32_t(channels));
  le32(rate);
  le32(rate * uint32_t(channels * bits / 8));
  le16(uint32_t(channels * bits / 8));
  le16(uint32_t(bits));
  h.insert(h.end(), {'d', 'a', 't', 'a'});
  le32(data_bytes);
  return h;
}

TEST(AudioErrors, TooManyChannelsAreRefusedFromTheHeader) {
  TempDir dir;
  const fs::path path = dir.path / "wide.wav";
  Bytes bytes = wav_header(100 * 2 * 4, 16, 100);
  bytes.resize(bytes.size() + 100 * 2 * 4);
  write_bytes(path, bytes);
  expect_error<Error>([&] { read_audio_file(path.string()); }, {"wide.wav", "100 channels", "kMaxAudioChannels"},
                      "100-channel WAV");
}

TEST(AudioErrors, HeaderClaimingBillionsOfFramesIsRefused) {
  TempDir dir;
  // 2^31 frames of 8-bit mono: a sparse 2 GiB file, so libsndfile believes
  // the header. Refused from the header, before any sample is allocated.
  const fs::path sparse = dir.path / "long.wav";
  write_bytes(sparse, wav_header(0x80000000u, 8));
  fs::resize_file(sparse, 44 + uintmax_t(0x80000000u));
  expect_error<InputError>([&] { read_audio_file(sparse.string()); },
                           {"long.wav", "2147483648 frames", "kMaxAudioFrames", "28800000"}, "2^31-frame WAV");
  // The same claim in a short file: libsndfile trusts the file's length, and
  // the few samples present are what comes back.
  const fs::path liar = dir.path / "liar.wav";
  Bytes bytes = wav_header(0xFFFFFFF0u, 16);
  for (int i = 0; i < 100; ++i) bytes.insert(bytes.end(), {uint8_t(i), 0});
  write_bytes(liar, bytes);
  try {
    const AudioClip clip = read_audio_file(liar.string());
    ASSERT_EQ(clip.samples.size(), 100u);
    EXPECT_EQ(clip.samples[7], 7.0f / 32768.0f);
  } catch (const Error& e) {
    SUCCEED() << "refused: " << e.what();
  }
}

TEST(AudioErrors, NonAudioAndCorruptFiles) {
  TempDir dir;
  const fs::path text = dir.path / "speech.wav";
  write_bytes(text, Bytes{'n', 'o', 't', ' ', 'a', 'u', 'd', 'i', 'o', '\n', 'x', 'y', 'z'});
  expect_error<InputError>([&] { read_audio_file(text.string()); }, {"speech.wav", "not a WAV or FLAC"}, "text file");
  const Bytes png = image_file("png_rgb8");
  write_bytes(dir.path / "picture.wav", png);
  expect_error<InputError>([&] { read_audio_file((dir.path / "picture.wav").string()); }, {"not a WAV or FLAC"}, "PNG");
  expect_error<InputError>([&] { read_audio_file((dir.path / "missing.wav").string()); }, {"missing.wav", "cannot open"},
                           "missing");
  // A RIFF WAVE header with nothing sensible after it.
  Bytes junk = {'R', 'I', 'F', 'F', 0x40, 0, 0, 0, 'W', 'A', 'V', 'E'};
  for (int i = 0; i < 60; ++i) junk.push_back(uint8_t(i * 37));
  write_bytes(dir.path / "junk.wav", junk);
  expect_error<Error>([&] { read_audio_file((dir.path / "junk.wav").string()); }, {"junk.wav"}, "junk after RIFF WAVE");
  // NaN in a float WAV.
  Bytes floats = read_bytes(kFiles / "wav_float32.wav");
  const uint32_t nan_bits = 0x7FC00000u;
  std::memcpy(&floats[floats.size() - 8], &nan_bits, 4);
  write_bytes(dir.path / "nan.wav", floats);
  expect_error<InputError>([&] { read_audio_file((dir.path / "nan.wav").string()); }, {"nan.wav", "not a finite"},
                           "NaN sample");
}

// ---------------------------------------------------------------- mutation fuzzing

Bytes mutate(const Bytes& seed, const std::vector<Bytes>& donors, std::mt19937& rng) {
  Bytes b = seed;
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : size_t(rng() % n); };
  const int rounds = rng() % 2 ? 1 : 2 + int(rng() % 3);
  for (int r = 0; r < rounds && !b.empty(); ++r) {
    switch (rng() % 6) {
      case 0:  // bit flips
        for (int k = 1 + int(rng() % 8); k > 0; --k) b[pick(b.size())] ^= uint8_t(1u << (rng() % 8));
        break;
      case 1:  // truncation
        b.resize(pick(b.size()));
        break;
      case 2: {  // a splice from another file
        const Bytes& d = donors[pick(donors.size())];
        if (d.empty()) break;
        const size_t from = pick(d.size()), len = 1 + pick(std::min<size_t>(64, d.size() - from));
        const size_t at = pick(b.size());
        b.insert(b.begin() + long(at), d.begin() + long(from), d.begin() + long(from + len));
        break;
      }
      case 3: {  // interesting values
        static const uint8_t values[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE};
        const size_t at = pick(b.size());
        for (size_t k = 0; k < 1 + pick(4) && at + k < b.size(); ++k) b[at + k] = values[rng() % 6];
        break;
      }
      case 4: {  // delete a run
        const size_t at = pick(b.size()), len = 1 + pick(32);
        b.erase(b.begin() + long(at), b.begin() + long(std::min(b.size(), at + len)));
        break;
      }
      case 5: {  // duplicate a run
        const size_t at = pick(b.size()), len = 1 + pick(std::min<size_t>(128, b.size() - at));
        const Bytes run(b.begin() + long(at), b.begin() + long(at + len));
        b.insert(b.begin() + long(pick(b.size())), run.begin(), run.end());
        break;
      }
    }
  }
  return b;
}

TEST(MediaFuzz, MutatedImagesDecodeOrThrowError) {
  std::vector<Bytes> seeds;
  for (const auto& e : manifest()["images"]) seeds.push_back(read_bytes(kFiles / e["file"].get<std::string>()));
  std::mt19937 rng(20240611);
  constexpr int kIterations = 60000;
  int decoded = 0, refused = 0;
  for (int i = 0; i < kIterations; ++i) {
    const Bytes& seed = seeds[size_t(rng() % seeds.size())];
    Bytes b = mutate(seed, seeds, rng);
    if (b.size() > 8 && b[0] == 0x89 && rng() % 2) fix_png_crcs(b);  // get past the CRC check half the time
    try {
      const RgbImage image = decode_image(b.data(), b.size(), "mutant");
      ASSERT_GT(image.width, 0) << "iteration " << i;
      ASSERT_GT(image.height, 0) << "iteration " << i;
      ASSERT_LE(int64_t(image.width) * image.height, kMaxImagePixels) << "iteration " << i;
      ASSERT_EQ(image.pixels.size(), size_t(image.width) * size_t(image.height) * 3) << "iteration " << i;
      ++decoded;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("mutant"), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": not a splitdec::Error: " << e.what();
    }
  }
  // Both outcomes must be common, or the mutations are not reaching the decoders.
  EXPECT_GT(decoded, kIterations / 50);
  EXPECT_GT(refused, kIterations / 5);
  std::printf("%d mutants decoded, %d refused\n", decoded, refused);
}

TEST(MediaFuzz, MutatedAudioReadsOrThrowsError) {
  std::vector<Bytes> seeds;
  for (const auto& e : manifest()["audio"]) seeds.push_back(read_bytes(kFiles / e["file"].get<std::string>()));
  TempDir dir;
  {  // a FLAC seed too
    const fs::path flac = dir.path / "seed.flac";
    SF_INFO info{};
    info.samplerate = 16000;
    info.channels = 1;
    info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    SNDFILE* out = sf_open(flac.c_str(), SFM_WRITE, &info);
    ASSERT_NE(out, nullptr);
    std::vector<short> s(2000);
    for (size_t i = 0; i < s.size(); ++i) s[i] = short((i * 7919) % 20000 - 10000);
    sf_write_short(out, s.data(), sf_count_t(s.size()));
    sf_close(out);
    seeds.push_back(read_bytes(flac));
  }
  std::mt19937 rng(777);
  constexpr int kIterations = 3000;
  const fs::path path = dir.path / "mutant.wav";
  int read = 0, refused = 0;
  for (int i = 0; i < kIterations; ++i) {
    Bytes b = mutate(seeds[size_t(rng() % seeds.size())], seeds, rng);
    write_bytes(path, b);
    try {
      const AudioClip clip = read_audio_file(path.string());
      ASSERT_FALSE(clip.samples.empty()) << "iteration " << i;
      ASSERT_LE(int64_t(clip.samples.size()), kMaxAudioFrames);
      for (float v : clip.samples) ASSERT_TRUE(std::isfinite(v)) << "iteration " << i;
      ++read;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("mutant.wav"), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": not a splitdec::Error: " << e.what();
    }
  }
  EXPECT_GT(read, kIterations / 20);
  EXPECT_GT(refused, kIterations / 20);
  std::printf("%d mutants read, %d refused\n", read, refused);
}

TEST(AudioErrors, RatesOutsideTheResamplersRangeAreRefused) {
  TempDir dir;
  for (const auto& [rate, text] : {std::pair{500u, "500 Hz"}, std::pair{1000000u, "1000000 Hz"}}) {
    Bytes wav = wav_header(64, 16, 1, rate);
    wav.resize(wav.size() + 64, 0);
    write_bytes(dir.path / "odd.wav", wav);
    expect_error<InputError>([&] { read_audio_file((dir.path / "odd.wav").string()); },
                             {"odd.wav", text, "1000 to 768000 Hz"}, "odd rate");
  }
  EXPECT_THROW(AudioResampler(999, 16000), InputError);
}

}  // namespace
}  // namespace splitdec
