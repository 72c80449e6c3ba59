// The splitdec command line: make-model, quantize, generate, chat, tokenize, bench, export-onnx, serve, embed-media.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli_common.h"
#include "core/error.h"

namespace splitdec::cli {
void add_make_model(CLI::App& app, std::function<int()>& run);
void add_quantize(CLI::App& app, std::function<int()>& run);
void add_generate(CLI::App& app, std::function<int()>& run);
void add_chat(CLI::App& app, std::function<int()>& run);
void add_tokenize(CLI::App& app, std::function<int()>& run);
void add_bench(CLI::App& app, std::function<int()>& run);
void add_export_onnx(CLI::App& app, std::function<int()>& run);
void add_serve(CLI::App& app, std::function<int()>& run);
void add_embed_media(CLI::App& app, std::function<int()>& run);
}  // namespace splitdec::cli

int main(int argc, char** argv) {
  CLI::App app{"splitdec: a runtime for Gemma-style multimodal decoders"};
  app.require_subcommand(1);
  std::function<int()> run;
  splitdec::cli::add_make_model(app, run);
  splitdec::cli::add_quantize(app, run);
  splitdec::cli::add_generate(app, run);
  splitdec::cli::add_chat(app, run);
  splitdec::cli::add_tokenize(app, run);
  splitdec::cli::add_bench(app, run);
  splitdec::cli::add_export_onnx(app, run);
  splitdec::cli::add_serve(app, run);
  splitdec::cli::add_embed_media(app, run);
  // --version on the program and on every command, as llama.cpp's tools have it.
  app.set_version_flag("--version", "splitdec " SPLITDEC_VERSION);
  // (export-onnx hands every argument to its own program, which answers --version itself.)
  for (CLI::App* cmd : app.get_subcommands({}))
    if (cmd->get_name() != "export-onnx") cmd->set_version_flag("--version", "splitdec " SPLITDEC_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; every other parse error is a user error: one line, exit 1.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "splitdec: error: %s (see --help)\n", e.what());
    return 1;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "splitdec: error: %s\n", e.what());
    return 1;
  }
}
