#include <unistd.h>

#include <cstdio>

#include "cli_common.h"
#include "core/dtype.h"
#include "tools/make_model.h"
#include "prompt/chat_template.h"

namespace splitdec::cli {

void add_make_model(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("make-model", "write a random-weight model directory");
  auto o = std::make_shared<MakeModelOptions>();
  auto dtype = std::make_shared<std::string>();
  auto layers = std::make_shared<int>(0);
  cmd->add_option("--preset", o->preset,
                  "tiny-gemma3 | tiny-gemma3-img256 | tiny-gemma3-256 | tiny-gemma4 | tiny-gemma4-unified | tiny-gemma4-ple | tiny-gemma4-moe | gemma3-1b | "
                  "gemma3-12b | gemma4-12b | gemma4-12b-attention | gemma4-31b | gemma4-e2b | gemma4-e4b | gemma4-26b-a4b")
      ->required();
  cmd->add_option("--out", o->out_dir, "output directory")->required();
  cmd->add_option("--seed", o->seed, "random seed (same seed, same bytes)")->transform(seed_value());
  cmd->add_option("--dtype", *dtype, "f32 | bf16 | f16 (default: f32 tiny, bf16 full-size)");
  cmd->add_option("--layers", *layers, "keep only the first N layers");
  cmd->add_option("--weights", o->weights,
                  "q8 | q4: write the decoder's matrices as splitdec quantize would from the --dtype values (a "
                  "model larger than the disk in bf16)");
  cmd->callback([cmd, o, dtype, layers, &run] {
    run = [cmd, o, dtype, layers] {
      if (!dtype->empty()) o->dtype = parse_dtype_flag("--dtype", *dtype);
      if (cmd->count("--layers")) o->layers = *layers;
      // The family's built-in template, kept where real checkpoints keep theirs.
      o->chat_template = ChatTemplate::builtin_source(o->preset.find("gemma4") != std::string::npos ? "gemma4" : "gemma3");
      if (::isatty(2))
        o->progress = [](size_t done, size_t total) {
          progress_line(done < total ? "writing weights " + std::to_string(done + 1) + "/" + std::to_string(total) : "");
        };
      make_model(*o);
      std::printf("wrote %s (preset %s, seed %llu)\n", o->out_dir.c_str(), o->preset.c_str(),
                  static_cast<unsigned long long>(o->seed));
      return 0;
    };
  });
}

}  // namespace splitdec::cli
