// Flags shared by the splitdec subcommands, and helpers to turn them into
// library options.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "pipeline/session.h"

namespace splitdec::cli {

struct SessionFlags {
  std::string plan = "split";
  std::string policy;
  int chunk = 256;
  int64_t max_length = 0;
  bool trace = false, verbose = false;
  int threads = 0;
  std::string kv_dtype = "f32";
  void add_to(CLI::App& app);
  SessionOptions options(const ModelConfig& config, int64_t default_capacity) const;
};

struct SamplingFlags {
  float temperature = 0.f, top_p = 1.f, min_p = 0.f, repetition_penalty = 1.f;
  int top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  void add_to(CLI::App& app);
  SamplingOptions options(const CLI::App& app) const;
};

// "f32" | "bf16" | "f16" given to `flag`; InputError otherwise.
DType parse_dtype_flag(const std::string& flag, const std::string& value);

// Loads a model, with a progress line on stderr when it is a terminal.
Model load_model(const std::string& dir);
// A progress callback for long prefills (nullptr when stderr is not a terminal).
std::function<void(int64_t, int64_t)> prefill_progress();

void print_memory(const Session& s);
void print_trace(const std::vector<TraceEntry>& trace, size_t from);

}  // namespace splitdec::cli
