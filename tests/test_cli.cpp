// The command line end to end: make-model, generate with --prompt and
// --input, --logits, and a clear error with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include "core/npy.h"
#include "test_support.h"

using namespace splitdec;

namespace {

void expect_fails_with(const std::string& args, std::initializer_list<const char*> fragments) {
  const test::CommandResult r = test::run_splitdec(args);
  EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  for (const char* f : fragments) EXPECT_NE(r.output.find(f), std::string::npos) << "'" << f << "' not in: " << r.output;
  EXPECT_EQ(r.output.find("Aborted"), std::string::npos);
}

}  // namespace

TEST(Cli, MakeModelAndGenerateWithImagePrompt) {
  const std::string dir = test::temp_dir("cli-model");
  auto r = test::run_splitdec("make-model --preset tiny-gemma3 --out " + dir + " --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_splitdec("generate --model " + dir + " --prompt 'A cat <image:" + dir +
                         "/demo_image.npy> sits' --max-new-tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[0] tokens:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[0] text:"), std::string::npos) << r.output;
  // Same seed, same output.
  EXPECT_EQ(test::run_splitdec("generate --model " + dir + " --prompt 'A cat <image:" + dir +
                               "/demo_image.npy> sits' --max-new-tokens 5")
                .output,
            r.output);
}

TEST(Cli, InputFileBatchAndLogits) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-input");
  std::vector<float> media(size_t(3 * 64), 0.25f);
  write_npy(work + "/media.npy", {3, 64}, media.data());
  test::write_file(work + "/in.json", R"({
    "tokens": [[2, 6, 8, 8, 7, 40], [0, 2, 6, 8, 7, 41]],
    "modality": [["text","text","image","image","text","text"], ["text","text","text","image","text","text"]],
    "attention_mask": [[1,1,1,1,1,1],[0,1,1,1,1,1]],
    "media_embeddings": "media.npy"})");
  const auto r = test::run_splitdec("generate --model " + dir + " --input " + work + "/in.json --max-new-tokens 3 --logits " +
                                    work + "/logits.npy");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[1] tokens:"), std::string::npos) << r.output;
  const NpyArray logits = read_npy(work + "/logits.npy");
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{2, 6, 512}));
}

TEST(Cli, BadInputsAreClearErrors) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-bad");
  auto input = [&](const std::string& name, const std::string& json) {
    test::write_file(work + "/" + name, json);
    return "generate --model " + dir + " --input " + work + "/" + name;
  };
  expect_fails_with(input("malformed.json", "{\"tokens\": [[1, 2]"), {"malformed JSON"});
  expect_fails_with(input("lengths.json", R"({"tokens": [[2, 40, 41]], "modality": [["text", "text"]]})"),
                    {"modality", "2 entries", "3"});
  expect_fails_with(input("ragged.json", R"({"tokens": [[2, 40], [2]], "modality": [["text","text"],["text"]]})"),
                    {"tokens", "[1]"});
  expect_fails_with(input("range.json", R"({"tokens": [[2, 99999]], "modality": [["text", "text"]]})"),
                    {"99999", "outside the vocabulary", "512"});
  expect_fails_with(input("negative.json", R"({"tokens": [[2, -1]], "modality": [["text", "text"]]})"), {"-1"});
  expect_fails_with(input("modality.json", R"({"tokens": [[2, 8]], "modality": [["text", "picture"]]})"),
                    {"picture"});
  expect_fails_with(input("mask.json", R"({"tokens": [[2, 8]], "modality": [["text", "text"]], "attention_mask": [[1, 2]]})"),
                    {"attention_mask"});
  expect_fails_with(input("missing_media.json",
                          R"({"tokens": [[2, 8]], "modality": [["text", "image"]], "media_embeddings": "nope.npy"})"),
                    {"nope.npy"});
  std::vector<float> two_rows(2 * 64, 0.f);
  write_npy(work + "/two.npy", {2, 64}, two_rows.data());
  expect_fails_with(input("count.json",
                          R"({"tokens": [[2, 8, 8, 8]], "modality": [["text", "image", "image", "image"]], "media_embeddings": "two.npy"})"),
                    {"2 media embedding rows", "3 non-text positions"});
  std::vector<float> wide(2 * 65, 0.f);
  write_npy(work + "/wide.npy", {2, 65}, wide.data());
  expect_fails_with(input("wide.json", R"({"tokens": [[2, 8, 8]], "modality": [["text", "image", "image"]], "media_embeddings": "wide.npy"})"),
                    {"hidden_size=64"});
  expect_fails_with("generate --model " + dir + " --input " + work + "/does-not-exist.json", {"does-not-exist.json"});
  expect_fails_with("generate --model " + work + "/no-model --prompt hi", {"config.json"});
  expect_fails_with("generate --model " + dir + " --prompt hi --input x.json", {"exactly one"});
  expect_fails_with("generate --model " + dir + " --prompt 'see <image:" + work + "/nope.npy>'", {"nope.npy"});
  expect_fails_with("generate --model " + dir + " --prompt hi --policy sideways", {"sideways", "gemma3"});
  expect_fails_with("make-model --preset huge --out " + work + "/m", {"huge", "tiny-gemma3"});
  expect_fails_with("make-model --preset gemma3-1b --layers 40 --out " + work + "/m", {"--layers 40", "26"});
  // A broken config.json.
  const std::string broken = test::temp_dir("cli-broken");
  test::write_file(broken + "/config.json", R"({"model_type": "gemma4", "text_config": {"enable_moe_block": true, "hidden_size_per_layer_input": 0}})");
  expect_fails_with("generate --model " + broken + " --prompt hi", {"enable_moe_block"});
}
