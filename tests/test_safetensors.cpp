// safetensors: every corrupt-header case, sharded checkpoints, and a
// random-mutation fuzz loop (no crash, no hang, no out-of-bounds read under
// ASan: every mutated file is parsed from an exactly-sized heap buffer).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/gemma_model.h"
#include "splitdec/splitdec.h"
#include "test_support.h"

using namespace splitdec;
using nlohmann::json;

namespace {

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A safetensors file from a header JSON (as text) and a data section.
std::string make_file(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  s += header;
  s.append(data_bytes, '\x01');
  return s;
}

std::string error_of(const std::string& file) {
  try {
    parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "bad.safetensors");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& file, std::initializer_list<const char*> fragments) {
  const std::string msg = error_of(file);
  ASSERT_FALSE(msg.empty()) << "accepted a corrupt file";
  EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
  for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
}

std::string tensor_header(const std::string& dtype, json shape, json offsets) {
  return json{{"t", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}}}}.dump();
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypes) {
  const std::string dir = test::temp_dir("st");
  const std::string path = dir + "/model.safetensors";
  std::vector<TensorToWrite> ts;
  ts.push_back({"a", DType::F32, {2, 2}, f32_bytes({1, -2, 3.5f, 0})});
  std::vector<uint8_t> bf(6), hf(6);
  const float vals[3] = {1.5f, -0.25f, 3.f};
  for (int i = 0; i < 3; ++i) {
    uint16_t b = f32_to_bf16(vals[i]), h = f32_to_f16(vals[i]);
    std::memcpy(bf.data() + 2 * i, &b, 2);
    std::memcpy(hf.data() + 2 * i, &h, 2);
  }
  ts.push_back({"b", DType::BF16, {3}, bf});
  ts.push_back({"c", DType::F16, {3, 1}, hf});
  ts.push_back({"empty", DType::F32, {0, 4}, {}});
  write_safetensors(path, ts, {{"format", "pt"}});
  TensorStore s = TensorStore::open_dir(dir);
  EXPECT_EQ(s.get("a").to_f32(), (std::vector<float>{1, -2, 3.5f, 0}));
  EXPECT_EQ(s.get("b").to_f32(), (std::vector<float>{1.5f, -0.25f, 3.f}));
  EXPECT_EQ(s.get("c").to_f32(), (std::vector<float>{1.5f, -0.25f, 3.f}));
  EXPECT_EQ(s.get("c").shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(s.get("empty").numel(), 0);
  EXPECT_EQ(s.find("missing"), nullptr);
  try {
    s.get("missing");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos);
  }
}

// The streaming writer: pieces of any size across tensor edges (zero-size
// tensors in between) give write_safetensors' bytes; I8 / U8 read back as
// bytes and refuse to_f32 by name; too many or too few bytes are errors.
TEST(Safetensors, StreamingWriterMatchesTheWholeFileWriter) {
  const std::string dir = test::temp_dir("st-stream");
  std::vector<TensorToWrite> ts;
  ts.push_back({"a", DType::F32, {3}, f32_bytes({1, 2, 3})});
  ts.push_back({"none", DType::F16, {0}, {}});
  ts.push_back({"q", DType::I8, {2, 3}, {1, 0xff, 0x80, 4, 5, 6}});
  ts.push_back({"p", DType::U8, {5}, {9, 8, 7, 6, 5}});
  write_safetensors(dir + "/whole.safetensors", ts, {{"format", "pt"}});
  std::vector<SafetensorsWriter::Entry> entries;
  std::vector<uint8_t> all;
  for (const auto& t : ts) entries.push_back({t.name, t.dtype, t.shape}), all.insert(all.end(), t.bytes.begin(), t.bytes.end());
  {
    SafetensorsWriter w(dir + "/model.safetensors", entries, {{"format", "pt"}});
    for (size_t i = 0; i < all.size(); i += 5) w.write(all.data() + i, std::min<size_t>(5, all.size() - i));
    w.finish();
  }
  EXPECT_EQ(test::read_file(dir + "/model.safetensors"), test::read_file(dir + "/whole.safetensors"));
  const TensorStore s = TensorStore::open_dir(dir);
  EXPECT_EQ(s.get("q").dtype, DType::I8);
  EXPECT_EQ(int8_t(s.get("q").data[2]), -128);
  EXPECT_EQ(s.get("p").data[4], 5);
  try {
    (void)s.get("q").to_f32();
    ADD_FAILURE() << "I8 read as floats";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'q' is stored as I8"), std::string::npos) << e.what();
  }
  {
    SafetensorsWriter w(dir + "/short.safetensors", entries);
    w.write(all.data(), all.size() - 1);
    EXPECT_THROW(w.finish(), Error);
    w.write(all.data(), 1);
    EXPECT_THROW(w.write(all.data(), 1), Error);  // past the last tensor
  }
}

TEST(Safetensors, CorruptHeaders) {
  expect_error("", {"too short"});
  expect_error(std::string("\x05\0\0\0", 4), {"too short"});
  {
    std::string f = make_file("{}", 0);
    f[0] = char(0xff), f[1] = char(0xff), f[2] = char(0xff);  // length 16M, file is tiny
    expect_error(f, {"runs past the end"});
    f[7] = char(0x7f);
    expect_error(f, {"exceeds the limit"});
  }
  expect_error(make_file("{\"t\": ", 0), {"not valid JSON"});
  expect_error(make_file("[1, 2]", 0), {"not a JSON object"});
  expect_error(make_file(R"({"t": 3})", 0), {"'t'", "not an object"});
  expect_error(make_file(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4), {"'t'", "dtype"});
  expect_error(make_file(tensor_header("F64", {4}, {0, 32}), 32), {"'t'", "F64", "not supported"});
  expect_error(make_file(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), {"'t'", "shape"});
  expect_error(make_file(tensor_header("F32", {-1}, {0, 4}), 4), {"'t'", "non-negative"});
  expect_error(make_file(tensor_header("F32", {1.5}, {0, 4}), 4), {"'t'", "non-negative"});
  expect_error(make_file(tensor_header("F32", {1}, {0}), 4), {"'t'", "data_offsets"});
  expect_error(make_file(tensor_header("F32", {1}, {-4, 0}), 4), {"'t'", "data_offsets"});
  expect_error(make_file(tensor_header("F32", {1}, {8, 4}), 8), {"'t'", "begin 8 > end 4"});
  expect_error(make_file(tensor_header("F32", {1}, {0, 4}), 3), {"'t'", "outside the data section"});
  expect_error(make_file(tensor_header("F32", {2}, {0, 4}), 8), {"'t'", "byte span 4", "8"});
  expect_error(make_file(tensor_header("BF16", {3}, {0, 4}), 8), {"'t'", "byte span 4", "6"});
  expect_error(make_file(tensor_header("F32", {1u << 30, 1u << 30, 1u << 30}, {0, 4}), 4), {"'t'", "too large"});
  expect_error(make_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                         12),
               {"'a'", "'b'", "overlap"});
  expect_error(make_file(R"({"__metadata__": 5})", 0), {"__metadata__"});
  // A valid header for comparison.
  EXPECT_EQ(error_of(make_file(tensor_header("F32", {1}, {0, 4}), 4)), "");
}

TEST(Safetensors, TruncatedFileOnDisk) {
  const std::string dir = test::temp_dir("st-trunc");
  write_safetensors(dir + "/model.safetensors", {{"w", DType::F32, {4}, f32_bytes({1, 2, 3, 4})}});
  std::string bytes = test::read_file(dir + "/model.safetensors");
  test::write_file(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 5));
  try {
    TensorStore::open_dir(dir);
    FAIL();
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos);
    EXPECT_NE(msg.find("'w'"), std::string::npos);
  }
}

TEST(Safetensors, ShardedIndex) {
  const std::string dir = test::temp_dir("st-shards");
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", DType::F32, {1}, f32_bytes({1})}});
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {{"b", DType::F32, {1}, f32_bytes({2})}});
  test::write_file(dir + "/model.safetensors.index.json",
                   R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                      "b": "model-00002-of-00002.safetensors"}})");
  TensorStore s = TensorStore::open_dir(dir);
  EXPECT_EQ(s.get("a").to_f32()[0], 1.f);
  EXPECT_EQ(s.get("b").to_f32()[0], 2.f);

  // A tensor listed under the wrong shard.
  test::write_file(dir + "/model.safetensors.index.json",
                   R"({"weight_map": {"a": "model-00002-of-00002.safetensors",
                                      "b": "model-00002-of-00002.safetensors"}})");
  EXPECT_THROW(TensorStore::open_dir(dir), FormatError);
  // A missing shard file.
  test::write_file(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "nope.safetensors"}})");
  EXPECT_THROW(TensorStore::open_dir(dir), FormatError);
  // A path escaping the directory.
  test::write_file(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_THROW(TensorStore::open_dir(dir), FormatError);
  // Malformed index.
  test::write_file(dir + "/model.safetensors.index.json", R"({"weight_map": 3})");
  EXPECT_THROW(TensorStore::open_dir(dir), FormatError);
  // No weights at all.
  EXPECT_THROW(TensorStore::open_dir(test::temp_dir("st-none")), FormatError);
}

TEST(Safetensors, FuzzRandomMutations) {
  const std::string dir = test::temp_dir("st-fuzz");
  write_safetensors(dir + "/m.safetensors", {{"alpha", DType::F32, {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})},
                                             {"beta", DType::BF16, {4}, std::vector<uint8_t>(8, 0x3f)},
                                             {"gamma", DType::F16, {1}, std::vector<uint8_t>(2, 0x3c)}});
  const std::string seed_file = test::read_file(dir + "/m.safetensors");
  std::mt19937_64 rng(1234);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int iterations = 0, accepted = 0;
  for (; iterations < 20000 && std::chrono::steady_clock::now() < deadline; ++iterations) {
    std::string f = seed_file;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 5) {
        case 0: f[rng() % f.size()] = char(rng()); break;                           // flip a byte
        case 1: f.resize(rng() % (f.size() + 1)); break;                            // truncate
        case 2: if (!f.empty()) f[rng() % std::min<size_t>(f.size(), 8)] = char(rng()); break;  // header length
        case 3: f.insert(rng() % (f.size() + 1), 1, "{}[]\",:0123456789"[rng() % 17]); break;  // JSON noise
        case 4: f.erase(rng() % (f.size() + 1), 1 + rng() % 3); break;
      }
      if (f.empty()) break;
    }
    // An exactly sized heap copy, so ASan sees any read past the end.
    std::vector<uint8_t> buf(f.begin(), f.end());
    try {
      auto tensors = parse_safetensors(buf.data(), buf.size(), "fuzz");
      for (auto& [name, t] : tensors) {  // touch every byte the views claim
        ASSERT_LE(t.data + t.nbytes, buf.data() + buf.size());
        ASSERT_GE(t.data, buf.data());
        volatile float sink = 0;
        for (float v : t.to_f32()) sink = sink + v;
      }
      ++accepted;
    } catch (const FormatError&) {
    }
  }
  EXPECT_GT(iterations, 100);
  RecordProperty("iterations", iterations);
  RecordProperty("accepted", accepted);
}

// The media frontends' weights are checked the same way, by name.
TEST(Weights, ANonFiniteFrontendValueIsRefusedByTensorName) {
  const std::string src = test::tiny_model_dir("tiny-gemma4-unified");
  const std::string dir = test::temp_dir("nan-frontend");
  for (const char* f : {"config.json", "model.safetensors"}) std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  std::string bytes = test::read_file(dir + "/model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  const std::string name = "model.vision_embedder.patch_dense.weight";
  ASSERT_TRUE(header.contains(name));
  const size_t at = 8 + header_len + header[name]["data_offsets"][0].get<size_t>() + 4 * 7;
  const float inf = INFINITY;
  std::memcpy(bytes.data() + at, &inf, 4);
  test::write_file(dir + "/model.safetensors", bytes);
  try {
    Engine::load(dir);
    FAIL() << "an Inf frontend weight was loaded";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("element 7"), std::string::npos) << e.what();
  }
}

TEST(Weights, ANonFiniteValueIsRefusedByTensorName) {
  const std::string src = test::tiny_model_dir("tiny-gemma4");
  const std::string dir = test::temp_dir("nan-weights");
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  std::string bytes = test::read_file(dir + "/model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  std::string name;
  for (const auto& [k, v] : header.items())
    if (k.find("language_model.layers.1.mlp.down_proj") != std::string::npos) name = k;
  ASSERT_FALSE(name.empty());
  ASSERT_EQ(header[name]["dtype"], "F32");
  const size_t at = 8 + header_len + header[name]["data_offsets"][0].get<size_t>() + 4 * 5;
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + at, &nan, 4);
  test::write_file(dir + "/model.safetensors", bytes);
  try {
    Model::load(dir);
    FAIL() << "a NaN weight was loaded";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("element 5"), std::string::npos) << e.what();
  }
}
