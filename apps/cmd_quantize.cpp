#include <unistd.h>

#include <cstdio>

#include "cli_common.h"
#include "core/machine.h"
#include "model/quantize_model.h"

namespace splitdec::cli {

void add_quantize(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("quantize", "write a model folder with 8-bit or 4-bit block weights (streamed from the source)");
  auto o = std::make_shared<QuantizeOptions>();
  cmd->add_option("-m,--model", o->model_dir, "source model directory")->required();
  cmd->add_option("--out", o->out_dir, "output directory (new or empty)")->required();
  cmd->add_option("--weights", o->weights,
                  "q8: Q8_0 blocks everywhere; q4: Q4_0 linear layers, Q8_0 embedding / LM head (llama.cpp's layouts)")
      ->required();
  cmd->add_option("--keep", o->keep, "tensor-name glob kept as stored, e.g. '*embed_tokens*' (repeatable)");
  cmd->callback([o, &run] {
    run = [o] {
      if (::isatty(2))
        o->progress = [](size_t done, size_t total) {
          std::fprintf(stderr, "\rquantizing: tensor %zu of %zu", done, total);
          if (done == total) std::fprintf(stderr, "\n");
        };
      const QuantizeSummary s = quantize_model(*o);
      std::printf("wrote %s (%s): %d matrices quantized, %d kept by --keep; %s -> %s\n", o->out_dir.c_str(), o->weights.c_str(),
                  s.quantized, s.kept, format_bytes(s.bytes_in).c_str(), format_bytes(s.bytes_out).c_str());
      return 0;
    };
  });
}

}  // namespace splitdec::cli
