// The command line end to end: make-model, generate with --prompt and
// --input, --logits, and a clear error with a non-zero exit for bad input.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "test_support.h"

using namespace splitdec;
namespace fs = std::filesystem;

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
  const auto again = test::run_splitdec("generate --model " + dir + " --prompt 'A cat <image:" + dir +
                                        "/demo_image.npy> sits' --max-new-tokens 5");
  EXPECT_EQ(again.output.substr(again.output.find("[0] tokens:")), r.output.substr(r.output.find("[0] tokens:")));
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

// A folder's generation_config.json sets the sampling fields no flag sets,
// as transformers reads it; --temperature 0 and --generation-config none
// keep greedy; --verbose says what applied and from where.
TEST(Cli, GenerationConfigSetsTheDefaultSampling) {
  const std::string dir = test::temp_dir("cli-genconfig") + "/m";
  ASSERT_EQ(test::run_splitdec("make-model --preset tiny-gemma3 --out " + dir).exit_code, 0);
  test::write_file(dir + "/generation_config.json", R"({"do_sample": true, "top_k": 5, "top_p": 0.9, "temperature": 0.7, "eos_token_id": [1, 106]})");
  auto tokens = [](const std::string& out) {
    const size_t at = out.find("tokens:");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const std::string base = "generate --model " + dir + " -p 'The sea' -n 12 -s 7 ";
  const auto from_file = test::run_splitdec(base + "-v");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  EXPECT_NE(from_file.output.find("sampling: sampled, temperature 0.7, top_k 5, top_p 0.9"), std::string::npos) << from_file.output;
  EXPECT_NE(from_file.output.find("generation_config.json: temperature top_k top_p"), std::string::npos) << from_file.output;
  const auto by_flags = test::run_splitdec(base + "--generation-config none --temperature 0.7 --top-k 5 --top-p 0.9");
  EXPECT_EQ(tokens(from_file.output), tokens(by_flags.output));
  EXPECT_NE(tokens(from_file.output), "");
  const auto greedy = test::run_splitdec(base + "--temperature 0 -v");
  EXPECT_NE(greedy.output.find("sampling: greedy"), std::string::npos) << greedy.output;
  EXPECT_EQ(tokens(greedy.output), tokens(test::run_splitdec(base + "--generation-config none").output));
  const auto flag_wins = test::run_splitdec(base + "--top-k 2 -v");
  EXPECT_NE(flag_wins.output.find("top_k 2"), std::string::npos) << flag_wins.output;
  EXPECT_NE(flag_wins.output.find("generation_config.json: temperature top_p"), std::string::npos) << flag_wins.output;
  test::write_file(dir + "/generation_config.json", R"({"do_sample": true, "top_p": 2})");
  const auto bad = test::run_splitdec(base);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("generation_config.json: top_p must be a number in"), std::string::npos) << bad.output;
}

// --json-schema (GenerateOptions::json_schema): the reply is a document of
// the schema under any sampler, then the end; a schema it cannot enforce is
// an error naming the keyword.
TEST(Cli, JsonSchemaConstrainsTheReply) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("cli-json-schema");
  test::write_file(work + "/enum.json", R"({"enum": ["yes", "no", 42, {"a": [true]}]})");
  for (const std::string sampler : {"", "--temperature 1.5 -s 3", "--top-k 5 -s 9"}) {
    const auto r = test::run_splitdec("generate --model " + dir + " -p 'x' -n 40 --json --json-schema " + work + "/enum.json " + sampler);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json out = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    EXPECT_EQ(out["stop_reason"], "stop_token") << r.output;
    const nlohmann::json reply = nlohmann::json::parse(out["text"].get<std::string>());
    const nlohmann::json allowed = nlohmann::json::parse(R"(["yes", "no", 42, {"a": [true]}])");
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), reply), allowed.end()) << reply.dump();
  }
  test::write_file(work + "/bad.json", R"({"type": "integer", "minimum": 1})");
  expect_fails_with("generate --model " + dir + " -p x -n 4 --json-schema " + work + "/bad.json", {"\"minimum\" is not supported"});
  expect_fails_with("generate --model " + dir + " -p x -n 4 --json-schema " + work + "/none.json", {"none.json: cannot open"});
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
  // <image:FILE> naming no file is an error (a typo must not become a prompt about nothing), as --image is.
  expect_fails_with("generate --model " + dir + " --max-new-tokens 1 --prompt 'see <image:" + work + "/nope.npy>'",
                    {"/nope.npy>: no such file"});
  expect_fails_with("generate --model " + dir + " --max-new-tokens 1 --prompt 'hear <audio:clip.wav>'", {"<audio:clip.wav>", "no such file"});
  expect_fails_with("generate --model " + dir + " --image " + work + "/nope.npy --prompt see", {"nope.npy", "no such file"});
  expect_fails_with("generate --model " + dir + " --prompt hi --policy sideways", {"sideways", "gemma3"});
  expect_fails_with("make-model --preset huge --out " + work + "/m", {"huge", "tiny-gemma3"});
  expect_fails_with("make-model --preset gemma3-1b --layers 40 --out " + work + "/m", {"--layers 40", "26"});
  // A broken config.json.
  const std::string broken = test::temp_dir("cli-broken");
  test::write_file(broken + "/config.json", R"({"model_type": "gemma4", "text_config": {"enable_moe_block": true, "hidden_size_per_layer_input": 0}})");
  expect_fails_with("generate --model " + broken + " --prompt hi", {"enable_moe_block"});
}

TEST(Cli, PlansAgreeAndTraceShowsTheRouter) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-plans");
  std::vector<float> media(size_t(12 * 64));
  for (size_t k = 0; k < media.size(); ++k) media[k] = float((k * 37) % 17) / 8.f - 1.f;
  write_npy(work + "/img.npy", {12, 64}, media.data());
  // Two turns; the second brings an image.
  test::write_file(work + "/turns.json", R"({"turns": [
    {"tokens": [[2, 40, 41, 42, 43]], "modality": [["text","text","text","text","text"]], "max_new_tokens": 3},
    {"tokens": [[44, 6, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7, 45]],
     "modality": [["text","text","image","image","image","image","image","image","image","image","image","image","image","image","text","text"]],
     "media_embeddings": "img.npy", "max_new_tokens": 4}]})");
  std::string first_tokens;
  NpyArray reference;
  for (const char* plan : {"reference", "single", "split", "split-copy", "unified"}) {
    const std::string out = work + "/" + plan + ".npy";
    const auto r = test::run_splitdec("generate --model " + dir + " --input " + work + "/turns.json --chunk 3 --plan " + plan +
                                      " --step-logits " + out + (std::string(plan) == "split" ? " --trace" : ""));
    ASSERT_EQ(r.exit_code, 0) << plan << "\n" << r.output;
    const std::string tokens = r.output.substr(r.output.find("[0] tokens:"));
    if (first_tokens.empty()) first_tokens = tokens;
    EXPECT_EQ(tokens, first_tokens) << plan;
    const NpyArray steps = read_npy(out);
    EXPECT_EQ(steps.shape, (std::vector<int64_t>{1, 7, 512})) << plan;
    if (reference.data.empty()) reference = steps;
    for (size_t k = 0; k < steps.data.size(); ++k) ASSERT_NEAR(steps.data[k], reference.data[k], 2e-4) << plan;
    if (std::string(plan) == "split") {
      EXPECT_NE(r.output.find("path masked"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("trace decode  positions [5, 6) path gqa"), std::string::npos) << r.output;
      // The second turn starts with the last token of the first.
      EXPECT_NE(r.output.find("trace prefill positions [7, 10) path gqa"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("trace prefill positions [10, 22) path masked"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("path masked     kv allocated 1"), std::string::npos) << r.output;
    }
  }
}

// A valid prompt is never refused for its image size: a 1200-token image on
// tiny-gemma4 at the default settings (rings first sized for 256 + 2 x 16
// positions) runs in every plan; the trace shows the chunk that grew the
// rings, -v the ring size after the run.
TEST(Cli, A1200TokenImageRunsAtDefaultSettings) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-big-image");
  const int n = 1200;
  std::vector<float> media(size_t(n) * 64);
  for (size_t k = 0; k < media.size(); ++k) media[k] = float((k * 29) % 23) / 11.f - 1.f;
  write_npy(work + "/img.npy", {n, 64}, media.data());
  nlohmann::json tokens = {2, 40, 6}, modality = {"text", "text", "text"};
  for (int k = 0; k < n; ++k) tokens.push_back(8), modality.push_back("image");
  for (int t : {7, 41}) tokens.push_back(t), modality.push_back("text");
  test::write_file(work + "/in.json", nlohmann::json{{"tokens", {tokens}}, {"modality", {modality}},
                                                     {"media_embeddings", "img.npy"}}.dump());
  std::string first_tokens;
  for (const char* plan : {"reference", "single", "split", "split-copy", "unified"}) {
    const auto r = test::run_splitdec("generate --model " + dir + " --input " + work + "/in.json --max-new-tokens 3 --trace -v --plan " + plan);
    ASSERT_EQ(r.exit_code, 0) << plan << "\n" << r.output;
    const std::string got = r.output.substr(r.output.find("[0] tokens:"));
    if (first_tokens.empty()) first_tokens = got;
    EXPECT_EQ(got, first_tokens) << plan;
    if (std::string(plan) == "split") {
      EXPECT_NE(r.output.find("trace prefill positions [3, 1203) path masked     kv allocated"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("trace prefill positions [3, 1203) path masked     kv allocated 0 B"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("x 296-position rings"), std::string::npos) << r.output;   // before
      EXPECT_NE(r.output.find("x 1208-position rings"), std::string::npos) << r.output;  // after: window 8 + 1200
    }
  }
}

TEST(Cli, SessionErrors) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  expect_fails_with("generate --model " + dir + " --prompt 'hello there' --chunk 0",
                    {"--chunk", "[1, 1048576]", "got 0"});
  expect_fails_with("generate --model " + dir + " --prompt 'hello there' --plan fast", {"fast", "split-copy"});
  expect_fails_with("generate --model " + dir + " --prompt 'hello there' --kv-dtype f8", {"--kv-dtype f8", "q8"});
  expect_fails_with("generate --model " + dir + " --prompt 'hello there' --weights q3", {"weights format 'q3'", "q8", "q4"});
  expect_fails_with("generate --model " + dir + " --prompt 'hello there' --threads -1", {"--threads"});
  const auto bf16 = test::run_splitdec("generate --model " + dir + " --prompt 'hello there' --kv-dtype bf16 --threads 1 -v");
  EXPECT_EQ(bf16.exit_code, 0) << bf16.output;
  const auto q8 = test::run_splitdec("generate --model " + dir + " --prompt 'hello there' --kv-dtype q8 --plan unified -v");
  EXPECT_EQ(q8.exit_code, 0) << q8.output;
  expect_fails_with("generate --model " + dir + " --prompt 'hello <image:" + dir + "/demo_image.npy> there' --max-length 10",
                    {"capacity of 10"});
}

// quantize writes a folder that generate runs as stored, with the tokens
// --weights gives at load; bad options are one error line.
TEST(Cli, QuantizeWritesAFolderThatGeneratesAsQuantizingAtLoad) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string out = test::temp_dir("cli-q4") + "/q4";
  const auto q = test::run_splitdec("quantize --model " + dir + " --out " + out + " --weights q4");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("matrices quantized"), std::string::npos) << q.output;
  const std::string args = " --prompt 'hello there' --max-new-tokens 6 --plan split";
  const auto from_folder = test::run_splitdec("generate --model " + out + args);
  const auto at_load = test::run_splitdec("generate --model " + dir + args + " --weights q4");
  ASSERT_EQ(from_folder.exit_code, 0) << from_folder.output;
  auto tokens = [](const std::string& o) { return o.substr(o.find("[0] tokens:")); };
  EXPECT_EQ(tokens(from_folder.output), tokens(at_load.output));
  expect_fails_with("quantize --model " + dir + " --out " + out + " --weights q4", {"not empty"});
  expect_fails_with("quantize --model " + dir + " --out " + out + "-2 --weights q2", {"'q2'"});
}

TEST(Cli, ChatThroughAPipeReusesTheCache) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-chat");
  test::write_file(work + "/turns.txt", "hello there\nwhat is in <image:" + dir + "/demo_image.npy> ?\n");
  const auto r = test::run_splitdec("chat --model " + dir + " --max-new-tokens 4 --trace < " + work + "/turns.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Turn 1 prefills from 0; turn 2's prefill starts where turn 1 ended and takes the masked path.
  const size_t first = r.output.find("trace prefill positions [0, ");
  ASSERT_NE(first, std::string::npos) << r.output;
  const size_t second = r.output.find("trace prefill positions [", first + 1);
  ASSERT_NE(second, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("trace prefill positions [0, ", first + 1), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("path masked", second), std::string::npos) << r.output;
  // The same bytes on stdin give the same transcript.
  const auto again = test::run_splitdec("chat --model " + dir + " --max-new-tokens 4 --trace < " + work + "/turns.txt");
  EXPECT_EQ(again.output, r.output);
}

// /clear starts the conversation over (the same first reply again), /save
// writes it as --messages JSON that generate replays, /help lists them, and
// an unknown command is an error that leaves the chat going.
TEST(Cli, ChatSlashCommands) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-chat-commands");
  test::write_file(work + "/turns.txt", "hello there\n/save " + work + "/one.json\nand more\n/clear\nhello there\n/help\n/nope\n/save " +
                                            work + "/two.json\n");
  const auto r = test::run_splitdec("chat --model " + dir + " --max-new-tokens 4 < " + work + "/turns.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/clear "), std::string::npos) << r.output;  // /help's list
  EXPECT_NE(r.output.find("/nope: not a command"), std::string::npos) << r.output;
  const nlohmann::json one = nlohmann::json::parse(test::read_file(work + "/one.json"));
  const nlohmann::json two = nlohmann::json::parse(test::read_file(work + "/two.json"));
  ASSERT_EQ(one.size(), 2u) << one.dump();
  EXPECT_EQ(one, two);  // after /clear, the same turn gives the same reply
  EXPECT_EQ(one[0]["role"], "user");
  EXPECT_EQ(one[0]["content"][0]["text"], "hello there");
  // The saved chat replays through --messages: the same prompt as the chat's first turn.
  const auto replay = test::run_splitdec("generate --model " + dir + " --messages " + work + "/one.json -n 1 --json");
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  // Media staged and then cleared (or whose turn failed) are not saved as
  // sent; text that is not UTF-8 is saved with U+FFFD, and the chat goes on.
  test::write_file(work + "/more.txt", "/image " + dir + "/demo_image.npy\n/clear\nhi\n/save " + work + "/three.json\ncaf\xe9\n/save " +
                                           work + "/four.json\n");
  const auto r2 = test::run_splitdec("chat --model " + dir + " --max-new-tokens 2 < " + work + "/more.txt");
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  const nlohmann::json three = nlohmann::json::parse(test::read_file(work + "/three.json"));
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[0]["content"].size(), 1u) << three.dump();  // the text only
  const nlohmann::json four = nlohmann::json::parse(test::read_file(work + "/four.json"));
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(four[2]["content"][0]["text"], "caf\xef\xbf\xbd");
}

// Ctrl-C while a reply is written stops it, drops the turn, and the chat
// reads on (here: a /save of the now empty conversation, then EOF, exit 0).
TEST(Cli, CtrlCStopsTheReplyNotTheChat) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("cli-chat-ctrl-c");
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const std::string out_err = work + "/stderr.txt";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    ::close(to_child[1]);
    ::close(from_child[0]);
    const int err = ::open(out_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, 2);
    // A reply far longer than the test waits for: 100000 tokens.
    ::execl(SPLITDEC_BINARY, SPLITDEC_BINARY, "chat", "--model", dir.c_str(), "--max-new-tokens", "100000", "--max-length", "100100",
            "--threads", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  const std::string first = "tell me everything\n";
  ASSERT_EQ(::write(to_child[1], first.data(), first.size()), ssize_t(first.size()));
  char buf[4096];
  ASSERT_GT(::read(from_child[0], buf, sizeof buf), 0);  // the reply has begun
  ::kill(pid, SIGINT);
  const std::string rest = "/save " + work + "/after.json\n";
  ASSERT_EQ(::write(to_child[1], rest.data(), rest.size()), ssize_t(rest.size()));
  ::close(to_child[1]);
  while (::read(from_child[0], buf, sizeof buf) > 0) {
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(from_child[0]);
  const std::string err = test::read_file(out_err);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find("(stopped; this turn is dropped"), std::string::npos) << err;
  EXPECT_EQ(nlohmann::json::parse(test::read_file(work + "/after.json")), nlohmann::json::array());
}

TEST(Cli, JsonOutputAndSamplingFlags) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const auto r = test::run_splitdec("generate --model " + dir +
                                    " --prompt 'hello' --chat --json --max-new-tokens 4 --temperature 0.9 --top-k 20 --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* key : {"\"tokens\"", "\"text\"", "\"prompt_tokens\"", "\"encode_ms\"", "\"prefill_ms\"", "\"decode_ms\"", "\"decode_tokens\"",
                          "\"plan\"", "\"trace\"", "\"path\":\"gqa\""})
    EXPECT_NE(r.output.find(key), std::string::npos) << key << " in " << r.output;
  const auto same = test::run_splitdec("generate --model " + dir +
                                       " --prompt 'hello' --chat --json --max-new-tokens 4 --temperature 0.9 --top-k 20 --seed 5");
  EXPECT_EQ(same.output.substr(same.output.find("\"tokens\"")), r.output.substr(r.output.find("\"tokens\"")));
  expect_fails_with("generate --model " + dir + " --prompt hi --top-p 1.5", {"--top-p"});
  expect_fails_with("chat --model " + dir + " --top-p 0 < /dev/null", {"--top-p"});
  expect_fails_with("generate --model " + dir + " --prompt hi --stop ''", {"stop string"});
}

TEST(Cli, ApiExampleRuns) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string cmd = std::string(CHAT_EXAMPLE_BINARY) + " " + dir + " " + dir + "/demo_image.npy 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ASSERT_EQ(::pclose(f), 0) << out;
  EXPECT_NE(out.find("model: "), std::string::npos) << out;
  EXPECT_NE(out.find("cache holds"), std::string::npos) << out;
}

TEST(Cli, UserErrorsAreOneLineAndExitOne) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  for (const std::string& args : {"generate --model " + dir + " --prompt hi --chunk abc", "generate --model " + dir + " --no-such-flag",
                                 std::string("generate --prompt hi"), std::string("frobnicate")}) {
    const auto r = test::run_splitdec(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  }
  EXPECT_EQ(test::run_splitdec("generate --help").exit_code, 0);
  // Nothing of the reply's header is printed before an error.
  const auto late = test::run_splitdec("generate --model " + dir + " --prompt 'hello there' --max-length 3");
  EXPECT_EQ(late.exit_code, 1);
  EXPECT_EQ(late.output.find("[0] text:"), std::string::npos) << late.output;
}

TEST(Cli, ARunThatFillsTheCacheStopsWithLength) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-length");
  test::write_file(work + "/in.json", R"({"tokens": [[2, 40, 41, 42, 43]], "modality": [["text","text","text","text","text"]]})");
  const auto r = test::run_splitdec("generate --model " + dir + " --input " + work + "/in.json --max-length 9 --max-new-tokens 20 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 5 prompt positions + 4 fed tokens fill 9; the 5th token is chosen but never fed.
  EXPECT_NE(r.output.find("\"stop_reason\":\"length\""), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(0, r.output.find('\n')));
  EXPECT_EQ(j["tokens"].size(), 5u) << r.output;
}

TEST(Cli, HostileNumbersInInputsAreClearErrors) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-hostile");
  auto input = [&](const std::string& name, const std::string& json) {
    test::write_file(work + "/" + name, json);
    return "generate --model " + dir + " --input " + work + "/" + name;
  };
  // A block id is never a size: INT_MAX is refused at once, not allocated.
  expect_fails_with(input("block.json", R"({"tokens": [[2, 8, 8, 40]], "modality": [["text","image","image","text"]],
                                          "block_ids": [[-1, 2147483647, 2147483647, -1]]})"),
                    {"block id 2147483647"});
  // A turn's budget past int32 is refused, not truncated.
  expect_fails_with(input("budget.json", R"({"turns": [{"tokens": [[2, 40]], "modality": [["text","text"]],
                                           "max_new_tokens": 4294967299}]})"),
                    {"max_new_tokens", "4294967299"});
  // The reference plan honours --max-length like every other plan.
  const std::string ok = input("ok.json", R"({"tokens": [[2, 40, 41, 42, 43]], "modality": [["text","text","text","text","text"]]})");
  expect_fails_with(ok + " --plan reference --max-length 3", {"capacity of 3"});
  const auto r = test::run_splitdec(ok + " --plan reference --max-length 9 --max-new-tokens 20 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"stop_reason\":\"length\""), std::string::npos) << r.output;
  // A folder where a file belongs is named.
  expect_fails_with("generate --model " + dir + " --input " + work, {work.c_str(), "directory"});
  // A KV cache larger than the machine is a clear error, not bad_alloc.
  expect_fails_with(ok + " --max-new-tokens 2000000000", {"--max-new-tokens"});
}

// Numeric flags are checked as text, with the flag and its range in the
// error: CLI11 alone read "--seed -1" as 2^64-1, saturated 2^64 to 2^64-1,
// and took "--max-length 0" (the default's marker) as given.
TEST(Cli, NumericFlagsOutsideTheirRangeAreRefused) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string generate = "generate --model " + dir + " --prompt 'hello there' ";
  expect_fails_with(generate + "--seed -1", {"--seed", "seeds are 0..18446744073709551615", "got -1"});
  expect_fails_with(generate + "--seed 18446744073709551616", {"--seed", "seeds are 0..18446744073709551615"});
  expect_fails_with(generate + "--seed 1e3", {"--seed", "got 1e3"});
  expect_fails_with(generate + "--max-length 0", {"--max-length", "[1, 2147483648]", "got 0"});
  expect_fails_with(generate + "--max-length -5", {"--max-length", "got -5"});
  expect_fails_with(generate + "--max-length 99999999999999999999", {"--max-length", "[1, 2147483648]"});
  expect_fails_with(generate + "--max-new-tokens -1", {"--max-new-tokens", "[0, 2147483647]"});
  expect_fails_with(generate + "--top-k -1", {"--top-k", "[0, 2147483647]"});
  expect_fails_with(generate + "--threads -1", {"--threads", "[0, 4096]"});
  expect_fails_with("chat --model " + dir + " --max-new-tokens 0", {"--max-new-tokens", "[1, 2147483647]"});
  expect_fails_with("bench --threads -2", {"--threads", "[0, 4096]"});
  expect_fails_with("make-model --preset tiny-gemma3 --out " + test::temp_dir("cli-seed") + "/m --seed -1",
                    {"--seed", "seeds are 0..18446744073709551615"});
  // The ends of the ranges are accepted; a leading zero is decimal, not octal.
  const auto top = test::run_splitdec(generate + "--seed 18446744073709551615 --temperature 1 --max-new-tokens 2");
  EXPECT_EQ(top.exit_code, 0) << top.output;
  const auto ten = test::run_splitdec(generate + "--seed 10 --temperature 1 --max-new-tokens 4 --json");
  const auto zero_ten = test::run_splitdec(generate + "--seed 010 --temperature 1 --max-new-tokens 4 --json");
  ASSERT_EQ(ten.exit_code, 0) << ten.output;
  ASSERT_EQ(zero_ten.exit_code, 0) << zero_ten.output;
  auto tokens = [](const std::string& out) { return nlohmann::json::parse(out.substr(0, out.find('\n')))["tokens"]; };
  EXPECT_EQ(tokens(zero_ten.output), tokens(ten.output));
}

// The reproduction from the hostile run: a reply that fills the cache after
// the sliding rings wrapped used to end `chat` in its own error handler.
// Now the reply stops at the capacity and every later turn is a clear error.
TEST(Cli, ChatGoesOnAfterAReplyFillsTheCache) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("cli-chat-full");
  test::write_file(work + "/turns.txt", "hi\nsecond\nthird\n");
  // --chunk 8: sliding rings of 48 positions, so they wrap long before 1000.
  const auto r = test::run_splitdec("chat --model " + dir + " --max-length 1000 --max-new-tokens 600 --chunk 8 < " + work +
                                    "/turns.txt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Each later turn makes room for itself: the oldest exchange goes, and the chat says so.
  EXPECT_NE(r.output.find("(the context is full: 1 oldest exchange dropped, the rest prefilled again)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("splitdec: error"), std::string::npos) << r.output;
}

TEST(Cli, JsonPrintsWhatEarlierTurnsMadeWhenALaterOneFails) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-json-late");
  test::write_file(work + "/turns.json", R"({"turns": [
    {"tokens": [[2, 40, 41]], "modality": [["text","text","text"]], "max_new_tokens": 3},
    {"tokens": [[42, 43, 44, 45, 46, 47, 48, 49]], "modality": [["text","text","text","text","text","text","text","text"]]}]})");
  const auto r = test::run_splitdec("generate --model " + dir + " --input " + work + "/turns.json --max-length 10 --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("\"tokens\":["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"error\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("splitdec: error:"), std::string::npos) << r.output;
}

TEST(Cli, TokenizeShowsWhatGenerateFeeds) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const std::string work = test::temp_dir("cli-tokenize");
  const auto prompt = test::run_splitdec("tokenize --model " + dir + " --prompt 'the cat sat'");
  ASSERT_EQ(prompt.exit_code, 0) << prompt.output;
  const auto p = nlohmann::json::parse(prompt.output);
  ASSERT_GE(p["tokens"].size(), 2u);
  EXPECT_EQ(p["tokens"][0], 2);  // BOS, as generate adds it
  EXPECT_EQ(p["pieces"].size(), p["tokens"].size());
  // --strings adds no special tokens: the same text gives the prompt's ids after BOS.
  test::write_file(work + "/s.json", R"(["the cat sat", "", "<|turn>"])");
  const auto strings = test::run_splitdec("tokenize --model " + dir + " --strings " + work + "/s.json");
  ASSERT_EQ(strings.exit_code, 0) << strings.output;
  const auto s = nlohmann::json::parse(strings.output);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], nlohmann::json(std::vector<int>(p["tokens"].begin() + 1, p["tokens"].end())));
  EXPECT_TRUE(s[1].empty());
  EXPECT_EQ(s[2].size(), 1u);  // a special piece in text is one token
  // --chat wraps the prompt as generate --chat does.
  const auto chat = test::run_splitdec("tokenize --model " + dir + " --prompt hi --chat");
  EXPECT_GT(nlohmann::json::parse(chat.output)["tokens"].size(), p["tokens"].size() - 2);
  test::write_file(work + "/bad.json", R"(["ok", 3])");
  expect_fails_with("tokenize --model " + dir + " --strings " + work + "/bad.json", {"array of strings"});
  expect_fails_with("tokenize --model " + dir, {"--prompt, --messages or --strings"});
}

// A Gemma-3 preset ships the same vocabulary as tokenizer.json and as
// SentencePiece tokenizer.model (as Google's folders do): a folder with only
// one of them gives the same tokens and text for every prompt form.
TEST(Cli, TokenizerJsonAloneAndSentencePieceAloneAgree) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("cli-tokenizer-forms");
  for (const char* form : {"json", "sp"}) {
    fs::create_directories(work + "/" + form);
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if ((name == "tokenizer.model" && std::string(form) == "json") || (name == "tokenizer.json" && std::string(form) == "sp"))
        continue;
      fs::create_symlink(e.path(), work + "/" + form + "/" + name);
    }
  }
  const std::string image = dir + "/demo_image.npy";
  for (const std::string& args : std::vector<std::string>{"--prompt 'The cat sat on the mat.'", "--chat --prompt 'Tell me a story about a cat.' --stop ' the'",
                                 "--chat --system 'Be kind.' --image " + image + " --prompt 'What is this?'"}) {
    const auto j = test::run_splitdec("generate --model " + work + "/json --json --max-new-tokens 12 " + args);
    const auto s = test::run_splitdec("generate --model " + work + "/sp --json --max-new-tokens 12 " + args);
    ASSERT_EQ(j.exit_code, 0) << j.output;
    ASSERT_EQ(s.exit_code, 0) << s.output;
    const auto jj = nlohmann::json::parse(j.output), sj = nlohmann::json::parse(s.output);
    EXPECT_EQ(jj["tokens"], sj["tokens"]) << args;
    EXPECT_EQ(jj["text"], sj["text"]) << args;
    EXPECT_EQ(jj["prompt_tokens"], sj["prompt_tokens"]) << args;
  }
  // chat through a pipe, with a tokenizer.json only.
  test::write_file(work + "/turns.txt", "hi\n/image " + image + "\nwhat is it?\n");
  const auto chat = test::run_splitdec("chat --model " + work + "/json --max-new-tokens 4 --system 'Be brief.' < " + work + "/turns.txt");
  EXPECT_EQ(chat.exit_code, 0) << chat.output;
}

// What llama.cpp users type: its short flags, --version everywhere, a clear
// word for a path that is not a model folder, and --input ids without
// 'modality' as all text.
TEST(Cli, LlamaCppHabits) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const auto longs = test::run_splitdec("generate --model " + dir + " --prompt 'The sea' --max-new-tokens 4 --max-length 64 --threads 1 --seed 5 --temperature 0.7");
  const auto shorts = test::run_splitdec("generate -m " + dir + " -p 'The sea' -n 4 -c 64 -t 1 -s 5 --temperature 0.7");
  ASSERT_EQ(longs.exit_code, 0) << longs.output;
  ASSERT_EQ(shorts.exit_code, 0) << shorts.output;
  auto reply = [](const std::string& out) { return out.substr(0, out.find("\nplan ")) + out.substr(out.find("\n[0] tokens:")); };
  EXPECT_EQ(reply(shorts.output), reply(longs.output));
  EXPECT_EQ(test::run_splitdec("generate -m " + dir + " -p hi -n 2 --ctx-size 32").exit_code, 0);
  for (const std::string args : {"--version", "generate --version", "serve --version", "chat --version", "quantize --version"}) {
    const auto v = test::run_splitdec(args);
    EXPECT_EQ(v.exit_code, 0) << args << "\n" << v.output;
    EXPECT_EQ(v.output.rfind("splitdec ", 0), 0u) << args << "\n" << v.output;
  }
  const std::string work = test::temp_dir("cli-habits");
  test::write_file(work + "/model.gguf", "GGUF");  // a GGUF cut after its magic
  expect_fails_with("generate -m " + work + "/model.gguf -p hi", {"model.gguf", "version", "truncated"});
  test::write_file(work + "/model.bin", "GGUF");
  expect_fails_with("generate -m " + work + "/model.bin -p hi", {"model.bin", "not a folder", "config.json", "GGUF"});
  expect_fails_with("generate -m " + work + "/nothing -p hi", {"nothing", "no such folder", "config.json"});
  test::write_file(work + "/ids.json", R"({"tokens": [[2, 6, 9, 40]]})");
  const auto ids = test::run_splitdec("generate -m " + dir + " --input " + work + "/ids.json -n 2");
  EXPECT_EQ(ids.exit_code, 0) << ids.output;
}
