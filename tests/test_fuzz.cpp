// Bounded mutation fuzzing of the input surfaces a user or a file controls:
// config.json, the --input JSON, .npy media files. Every mutated input must
// give a result or a splitdec::Error - never a crash, a hang or another
// exception type. Run under ASan in CI; each surface stops after a few
// seconds or a fixed number of inputs. (safetensors headers are fuzzed in
// test_safetensors.cpp.) GGUF files: the reader, the Gemma-3 config and
// tensors, and the vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/npy.h"
#include "io/gguf.h"
#include "io/families/gguf_model.h"
#include "io/families/gemma3_mmproj.h"
#include "io/families/mmproj.h"
#include "tokenizer/gguf_tokenizer.h"
#include "io/gguf_writer.h"
#include "io/media_embeddings.h"
#include "io/safetensors.h"
#include "io/model_config.h"
#include "media/frontend_config.h"
#include "media/media_frontend.h"
#include "tools/gguf_export.h"
#include "tools/mmproj_export.h"
#include "prompt/prompt_json.h"
#include "splitdec/splitdec.h"
#include "test_support.h"

using namespace splitdec;

namespace {

// Applies 1..4 random edits: byte flips, truncation, insertion of JSON
// syntax or digits, deletion.
std::string mutate(const std::string& seed, std::mt19937_64& rng) {
  std::string f = seed;
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits && !f.empty(); ++e) {
    switch (rng() % 5) {
      case 0: f[rng() % f.size()] = char(rng()); break;
      case 1: f.resize(rng() % (f.size() + 1)); break;
      case 2: f.insert(rng() % (f.size() + 1), 1, "{}[]\",:-.0123456789e"[rng() % 20]); break;
      case 3: f.erase(rng() % (f.size() + 1), 1 + rng() % 3); break;
      case 4: {  // a number somewhere becomes huge or negative
        const size_t at = f.find_first_of("0123456789", rng() % f.size());
        if (at != std::string::npos) f.replace(at, 1, rng() % 2 ? "4294967299" : "-7");
        break;
      }
    }
  }
  return f;
}

// Runs `consume` on mutations of `seed` for a bounded time; counts accepted inputs.
void fuzz(const std::string& seed, uint64_t rng_seed, const std::function<void(const std::string&)>& consume) {
  std::mt19937_64 rng(rng_seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  int iterations = 0, accepted = 0;
  for (; iterations < 3000 && std::chrono::steady_clock::now() < deadline; ++iterations) {
    const std::string input = mutate(seed, rng);
    try {
      consume(input);
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(iterations, 20);
  ::testing::Test::RecordProperty("iterations", iterations);
  ::testing::Test::RecordProperty("accepted", accepted);
}

}  // namespace

TEST(Fuzz, ConfigJson) {
  const std::string seed = test::read_file(test::tiny_model_dir("tiny-gemma4") + "/config.json");
  fuzz(seed, 11, [](const std::string& text) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      return;  // not JSON: load_model_config reports that; the parser below needs a document
    }
    parse_model_config(j, "config.json");
  });
}

TEST(Fuzz, InputJson) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  const std::string dir = test::temp_dir("fuzz-input");
  std::vector<float> media(size_t(2 * c.hidden_size), 0.5f);
  write_npy(dir + "/m.npy", {2, c.hidden_size}, media.data());
  const std::string seed = R"({"turns": [{"tokens": [[2, 6, 8, 8, 7, 40], [0, 2, 6, 8, 7, 41]],
    "modality": [["text","text","image","image","text","text"], ["text","text","text","image","text","text"]],
    "attention_mask": [[1,1,1,1,1,1],[0,1,1,1,1,1]], "block_ids": [[-1,-1,0,0,-1,-1],[-1,-1,-1,0,-1,-1]],
    "media_embeddings": "m.npy", "max_new_tokens": 3}, {"tokens": [[40], [41]], "modality": [["text"], ["text"]]}]})";
  fuzz(seed, 12, [&](const std::string& text) {
    test::write_file(dir + "/in.json", text);
    read_turns_json(dir + "/in.json", c, 4);
  });
}

TEST(Fuzz, NpyMediaFiles) {
  const ModelConfig& c = test::tiny_model("tiny-gemma4").config();
  const std::string dir = test::temp_dir("fuzz-npy");
  std::vector<float> rows(size_t(3 * c.hidden_size), 0.25f);
  write_npy(dir + "/seed.npy", {3, c.hidden_size}, rows.data());
  const std::string seed = test::read_file(dir + "/seed.npy");
  fuzz(seed, 13, [&](const std::string& bytes) {
    test::write_file(dir + "/m.npy", bytes);
    load_media_embeddings(dir + "/m.npy", c);
  });
}

TEST(Fuzz, ShardIndex) {
  const std::string dir = test::temp_dir("fuzz-index");
  std::vector<uint8_t> one(4), two(4);
  const float a = 1.f, b = 2.f;
  std::memcpy(one.data(), &a, 4), std::memcpy(two.data(), &b, 4);
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", DType::F32, {1}, one}});
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {{"b", DType::F32, {1}, two}});
  const std::string seed = R"({"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                              "b": "model-00002-of-00002.safetensors"}})";
  fuzz(seed, 14, [&](const std::string& text) {
    test::write_file(dir + "/model.safetensors.index.json", text);
    const TensorStore s = TensorStore::open_dir(dir);
    for (const auto& [name, t] : s.tensors()) (void)t.to_f32();
  });
}

TEST(Fuzz, GgufFiles) {
  const std::string dir = test::temp_dir("fuzz-gguf");
  GgufMetadata m;
  m.add_string("general.architecture", "gemma3");
  m.add_u32("gemma3.embedding_length", 32);
  m.add_u32("gemma3.block_count", 1);
  m.add_u32("gemma3.feed_forward_length", 64);
  m.add_u32("gemma3.attention.head_count", 2);
  m.add_u32("gemma3.attention.head_count_kv", 1);
  m.add_u32("gemma3.attention.key_length", 16);
  m.add_u32("gemma3.attention.sliding_window", 8);
  m.add_f32("gemma3.rope.freq_base", 10000.f);
  m.add_string("tokenizer.ggml.model", "llama");
  m.add_strings("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "<unk>", "a", "b", "ab", "<0x41>"});
  m.add_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -3, 0});
  m.add_i32s("tokenizer.ggml.token_type", {3, 3, 3, 2, 1, 1, 1, 6});
  m.add_u32("tokenizer.ggml.bos_token_id", 2);
  m.add_bools("gemma3.attention.sliding_window_pattern", {true});
  const std::string seed_path = dir + "/seed.gguf";
  {
    GgufWriter w(seed_path, m, {{"token_embd.weight", ggml_type::F32, {32, 8}}, {"output_norm.weight", ggml_type::F32, {32}},
                                {"blk.0.attn_q.weight", ggml_type::Q8_0, {32, 32}}});
    std::vector<uint8_t> bytes(32 * 8 * 4 + 32 * 4 + 32 * 34, 0x3c);
    w.write(bytes.data(), bytes.size());
    w.finish();
  }
  const std::string seed = test::read_file(seed_path);
  fuzz(seed, 14, [](const std::string& bytes) {
    const GgufFile f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz.gguf");
    tensors_from_gguf(f);
    gguf_vocabulary(f);
    model_config_from_gguf(f);
  });
}

// An mmproj (Gemma-3's vision tower as llama.cpp's converter writes it),
// mutated: its keys, names and the vision config they make are checked
// before anything they size is used.
TEST(Fuzz, MmprojFiles) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3", 0, "f32");
  const std::string work = test::temp_dir("fuzz-mmproj");
  export_gguf(GgufExportOptions{.model_dir = dir, .out_path = work + "/text.gguf", .weights = "f32", .chat_template = {}, .progress = {}});
  export_mmproj(MmprojExportOptions{.model_dir = dir, .out_path = work + "/mmproj.gguf", .weights = "f16", .progress = {}});
  const auto text = GgufFile::open(work + "/text.gguf");
  const ModelConfig decoder = load_model_config(work + "/text.gguf", work + "/mmproj.gguf");
  const std::string mutated = work + "/mutated.gguf";
  fuzz(test::read_file(work + "/mmproj.gguf"), 15, [&](const std::string& bytes) {
    const GgufFile f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz-mmproj.gguf");
    for (const auto& [name, view] : gemma3_tensors_from_mmproj(f)) view.first_non_finite();
    parse_frontend_config(gemma3_config_from_gguf_pair(*text, f), decoder, "fuzz-mmproj.gguf");
    // The whole load: the pair's config, then the tower's weights.
    test::write_file(mutated, bytes);
    MediaFrontend::load_mmproj(work + "/text.gguf", mutated, load_model_config(work + "/text.gguf", mutated));
  });
}

// A Gemma-4 mmproj (gemma4v and gemma4a towers), mutated: the keys, the
// sizes read off tensor shapes and the two rewritten tensors are checked
// before use, then the whole pair loads or is refused by name.
TEST(Fuzz, Gemma4MmprojFiles) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4-ple", 0, "f32");
  const std::string work = test::temp_dir("fuzz-gemma4-mmproj");
  export_gguf(GgufExportOptions{.model_dir = dir, .out_path = work + "/text.gguf", .weights = "f32", .chat_template = {}, .progress = {}});
  export_mmproj(MmprojExportOptions{.model_dir = dir, .out_path = work + "/mmproj.gguf", .weights = "f16", .progress = {}});
  const auto text = GgufFile::open(work + "/text.gguf");
  const ModelConfig decoder = load_model_config(work + "/text.gguf", work + "/mmproj.gguf");
  const std::string mutated = work + "/mutated.gguf";
  fuzz(test::read_file(work + "/mmproj.gguf"), 17, [&](const std::string& bytes) {
    const GgufFile f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz-mmproj.gguf");
    for (const auto& [name, view] : tensors_from_mmproj(f).views) view.first_non_finite();
    parse_frontend_config(config_from_gguf_pair(*text, f), decoder, "fuzz-mmproj.gguf");
    test::write_file(mutated, bytes);
    MediaFrontend::load_mmproj(work + "/text.gguf", mutated, load_model_config(work + "/text.gguf", mutated));
  });
}

// A Gemma-4 GGUF with experts, as quantize writes it (Q8_0 expert stacks,
// per-layer head counts), mutated: its keys and tensors are checked before
// use, then the whole model loads or is refused by name.
TEST(Fuzz, Gemma4GgufFiles) {
  const std::string work = test::temp_dir("fuzz-gemma4-gguf");
  export_gguf(GgufExportOptions{.model_dir = test::tiny_model_dir("tiny-gemma4-moe"), .out_path = work + "/seed.gguf",
                                .weights = "q8", .chat_template = {}, .progress = {}});
  const std::string mutated = work + "/mutated.gguf";
  fuzz(test::read_file(work + "/seed.gguf"), 16, [&](const std::string& bytes) {
    const GgufFile f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz-gemma4.gguf");
    tensors_from_gguf(f);
    model_config_from_gguf(f);
    test::write_file(mutated, bytes);
    Engine::load(mutated);
  });
}
