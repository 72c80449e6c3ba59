// Helpers shared by the tests: temporary directories, tiny models made once
// per process, and running the command line.
#pragma once

#include <string>

#include "model/gemma_model.h"

namespace splitdec::test {

// A fresh directory under the system temp dir, removed at process exit.
std::string temp_dir(const std::string& tag);

// Path of a model made with make-model (cached per preset/seed/dtype in this process).
std::string tiny_model_dir(const std::string& preset, uint64_t seed = 0, const std::string& dtype = "f32");
const Model& tiny_model(const std::string& preset);

struct CommandResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr together
};
// Runs the splitdec binary with `args` (a shell-quoted string).
CommandResult run_splitdec(const std::string& args);

std::string read_file(const std::string& path);
// A mono 16-bit PCM WAV at 16 kHz of `samples` (clamped to [-1, 1]).
void write_wav(const std::string& path, const std::vector<float>& samples);
void write_file(const std::string& path, const std::string& content);

}  // namespace splitdec::test
