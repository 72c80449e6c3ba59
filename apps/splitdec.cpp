// The splitdec command line: make-model, generate.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/npy.h"
#include "io/prompt_input.h"
#include "io/tokenizer.h"
#include "model/make_model.h"
#include "model/reference_forward.h"

using namespace splitdec;

namespace {

DType parse_dtype_flag(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  throw InputError("--dtype " + s + " is not supported (f32, bf16, f16 are)");
}

struct GenerateArgs {
  std::string model, prompt, input, logits_path, policy;
  int max_new_tokens = 16;
};

int run_generate(const GenerateArgs& a) {
  if (a.prompt.empty() == a.input.empty()) throw InputError("generate: give exactly one of --prompt or --input");
  if (a.max_new_tokens < 0) throw InputError("--max-new-tokens must be >= 0");
  Model model = Model::load(a.model);
  const ModelConfig& c = model.config();
  auto tokenizer = Tokenizer::open_dir(a.model);
  PromptBatch prompt;
  if (!a.input.empty()) {
    prompt = read_prompt_json(a.input, c);
  } else {
    if (!tokenizer) throw InputError(a.model + ": --prompt needs a tokenizer.model in the model directory");
    prompt = prompt_from_text(a.prompt, *tokenizer, c);
  }
  const MaskPolicy policy = a.policy.empty() ? c.default_policy : parse_mask_policy(a.policy);
  if (!a.logits_path.empty()) {
    const std::vector<float> logits = reference_logits(model, prompt, policy);
    write_npy(a.logits_path, {prompt.batch, prompt.seq, c.vocab_size}, logits.data());
  }
  const GreedyResult r = reference_greedy(model, prompt, policy, a.max_new_tokens);
  for (int b = 0; b < prompt.batch; ++b) {
    std::printf("[%d] tokens:", b);
    for (int t : r.tokens[size_t(b)]) std::printf(" %d", t);
    std::printf("\n");
    if (tokenizer) std::printf("[%d] text: %s\n", b, tokenizer->decode(r.tokens[size_t(b)]).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"splitdec: a runtime for Gemma-style multimodal decoders"};
  app.require_subcommand(1);

  MakeModelOptions mm;
  std::string mm_dtype;
  int mm_layers = 0;
  auto* make = app.add_subcommand("make-model", "write a random-weight model directory");
  make->add_option("--preset", mm.preset, "tiny-gemma3 | tiny-gemma4 | gemma3-1b | gemma3-12b | gemma4-12b")->required();
  make->add_option("--out", mm.out_dir, "output directory")->required();
  make->add_option("--seed", mm.seed, "random seed (same seed, same bytes)");
  make->add_option("--dtype", mm_dtype, "f32 | bf16 | f16 (default: f32 tiny, bf16 full-size)");
  make->add_option("--layers", mm_layers, "keep only the first N layers");

  GenerateArgs gen;
  auto* generate = app.add_subcommand("generate", "greedy generation");
  generate->add_option("--model", gen.model, "model directory")->required();
  generate->add_option("--prompt", gen.prompt, "text prompt; <image:FILE.npy> inserts an image");
  generate->add_option("--input", gen.input, "exact inputs as JSON (tokens, modality, attention_mask, media_embeddings)");
  generate->add_option("--max-new-tokens", gen.max_new_tokens, "tokens to generate per sequence");
  generate->add_option("--logits", gen.logits_path, "write prompt logits [batch, seq, vocab] as .npy");
  generate->add_option("--policy", gen.policy, "mask policy (default: the model family's)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*make) {
      if (!mm_dtype.empty()) mm.dtype = parse_dtype_flag(mm_dtype);
      if (make->count("--layers")) mm.layers = mm_layers;
      make_model(mm);
      std::printf("wrote %s (preset %s, seed %llu)\n", mm.out_dir.c_str(), mm.preset.c_str(),
                  static_cast<unsigned long long>(mm.seed));
      return 0;
    }
    if (*generate) return run_generate(gen);
  } catch (const splitdec::Error& e) {
    std::fprintf(stderr, "splitdec: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "splitdec: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
