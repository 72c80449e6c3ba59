// The splitdec command line: make-model, generate.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/npy.h"
#include "io/prompt_input.h"
#include "io/tokenizer.h"
#include "model/make_model.h"
#include "generate/greedy.h"
#include "model/reference_forward.h"
#include "pipeline/session.h"

using namespace splitdec;

namespace {

DType parse_dtype_flag(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  throw InputError("--dtype " + s + " is not supported (f32, bf16, f16 are)");
}

struct GenerateArgs {
  std::string model, prompt, input, logits_path, step_logits_path, policy, plan = "split";
  int max_new_tokens = 16;
  int chunk = 256;
  int64_t max_length = 0;
  bool trace = false, verbose = false;
};

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  return buf;
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt.empty() == a.input.empty()) throw InputError("generate: give exactly one of --prompt or --input");
  if (a.max_new_tokens < 0) throw InputError("--max-new-tokens must be >= 0");
  Model model = Model::load(a.model);
  const ModelConfig& c = model.config();
  auto tokenizer = Tokenizer::open_dir(a.model);
  std::vector<Turn> turns;
  if (!a.input.empty()) {
    turns = read_turns_json(a.input, c, a.max_new_tokens);
  } else {
    if (!tokenizer) throw InputError(a.model + ": --prompt needs a tokenizer.model in the model directory");
    turns.push_back({prompt_from_text(a.prompt, *tokenizer, c), a.max_new_tokens});
  }
  const MaskPolicy policy = a.policy.empty() ? c.default_policy : parse_mask_policy(a.policy);
  const int batch = turns[0].prompt.batch;

  GenerationResult r;
  if (a.plan == "reference") {
    r = reference_generate(model, turns, policy);
  } else {
    SessionOptions o;
    o.plan = parse_plan(a.plan);
    o.chunk = a.chunk;
    o.policy = policy;
    int64_t needed = 0;
    for (const Turn& t : turns) needed += t.prompt.seq + t.max_new_tokens;
    o.capacity = a.max_length > 0 ? a.max_length : needed;
    Session session(model, batch, o);
    if (a.verbose) {
      const KvMemory m = session.memory();
      std::fprintf(stderr, "plan %s, policy %s, capacity %lld, chunk %d\n", plan_name(o.plan), mask_policy_name(policy),
                   static_cast<long long>(o.capacity), o.chunk);
      std::fprintf(stderr, "KV cache: %d full layers x %lld positions = %s; %d sliding layers x %lld-position rings = %s; %d shared layers own none\n",
                   m.full_layers, static_cast<long long>(m.full_slots), mib(m.full_bytes).c_str(), m.sliding_layers,
                   static_cast<long long>(m.sliding_slots), mib(m.sliding_bytes).c_str(), m.shared_layers);
    }
    r = generate_greedy(session, turns);
    if (a.trace) {
      for (const TraceEntry& e : session.trace())
        std::printf("trace %-7s positions [%lld, %lld) path %-10s kv allocated %lld B, copied %lld B\n",
                    e.kind == TraceEntry::Prefill ? "prefill" : "decode", static_cast<long long>(e.begin),
                    static_cast<long long>(e.end), path_name(e.path), static_cast<long long>(e.kv_bytes_allocated),
                    static_cast<long long>(e.kv_bytes_copied));
    }
  }
  if (!a.logits_path.empty())
    write_npy(a.logits_path, {batch, turns[0].prompt.seq, c.vocab_size}, r.prompt_logits.data());
  if (!a.step_logits_path.empty()) write_npy(a.step_logits_path, {batch, r.steps, c.vocab_size}, r.step_logits.data());
  std::fprintf(stderr, "plan %s: prefill %.1f ms; decode %d steps in %.1f ms (%.1f tokens/s per sequence)\n", a.plan.c_str(),
               r.prefill_ms, r.decode_steps, r.decode_ms, r.decode_ms > 0 ? 1000.0 * r.decode_steps / r.decode_ms : 0.0);
  for (int b = 0; b < batch; ++b) {
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
  generate->add_option("--plan", gen.plan, "single | split | split-copy | unified | reference (default split)");
  generate->add_option("--chunk", gen.chunk, "prefill chunk size (default 256)");
  generate->add_option("--max-length", gen.max_length, "KV capacity in positions (default: what the input needs)");
  generate->add_option("--step-logits", gen.step_logits_path, "write logits of every generated step [batch, steps, vocab]");
  generate->add_flag("--trace", gen.trace, "print each chunk and step: positions, path, KV bytes allocated/copied");
  generate->add_flag("-v,--verbose", gen.verbose, "report the KV cache size per layer type");

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
