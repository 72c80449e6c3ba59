#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli_common.h"
#include "core/error.h"
#include "core/machine.h"
#include "tools/gguf_export.h"
#include "tools/mmproj_export.h"
#include "tools/quantize_model.h"
#include "prompt/chat_template.h"

namespace splitdec::cli {

void add_quantize(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("quantize",
                                 "write a model folder with 8-bit or 4-bit block weights, or (--out FILE.gguf) a GGUF file "
                                 "as llama.cpp's converter writes it (streamed from the source)");
  auto o = std::make_shared<QuantizeOptions>();
  cmd->add_option("-m,--model", o->model_dir, "source model directory")->required();
  cmd->add_option("--out", o->out_dir, "output directory (new or empty), or a FILE.gguf (Gemma-3 models)")->required();
  cmd->add_option("--weights", o->weights,
                  "q8: Q8_0 blocks everywhere; q4: Q4_0 linear layers, Q8_0 embedding / LM head (llama.cpp's layouts); "
                  "to a .gguf also f32, f16, bf16, and llama.cpp's K-quants q4_k, q5_k, q6_k (Q6_K embedding; rows that are not whole "
                  "256-value blocks fall back as llama.cpp's quantize does: Q5_0, Q5_1, Q8_0)")
      ->required();
  cmd->add_option("--keep", o->keep, "tensor-name glob kept as stored, e.g. '*embed_tokens*' (repeatable)");
  auto mmproj_out = std::make_shared<std::string>();
  cmd->add_option("--out-mmproj", *mmproj_out,
                  "with --out FILE.gguf: also write the media towers (Gemma-3 vision; Gemma-4 vision and audio) as an mmproj GGUF "
                  "(as llama.cpp's converter --mmproj does; matrices in --weights when it is f32, f16, bf16 or q8, else F16)");
  cmd->callback([o, mmproj_out, &run] {
    run = [o, mmproj_out] {
      if (::isatty(2))
        o->progress = [](size_t done, size_t total) {
          std::fprintf(stderr, "\rquantizing: tensor %zu of %zu", done, total);
          if (done == total) std::fprintf(stderr, "\n");
        };
      if (std::filesystem::path(o->out_dir).extension() == ".gguf") {
        if (!o->keep.empty()) throw InputError("--keep is not taken when writing a GGUF (--out " + o->out_dir + ")");
        check_gguf_weights(o->weights);  // before either file is written
        std::string mmproj_pending, tower_type_name;
        int mmproj_tensors = 0;
        if (!mmproj_out->empty()) {  // first: it is the smaller file, and the one a folder may not have
          std::error_code ec;
          if (std::filesystem::weakly_canonical(*mmproj_out, ec) == std::filesystem::weakly_canonical(o->out_dir, ec))
            throw InputError("--out-mmproj " + *mmproj_out + " is the --out file; the pair is two files");
          // The tower in the weights' type where an mmproj has it (float or Q8_0), else F16.
          const bool tower_type = o->weights == "f32" || o->weights == "f16" || o->weights == "bf16" || o->weights == "q8";
          tower_type_name = tower_type ? o->weights : "f16";
          // Under a pair name until the text model is written too: a pair
          // whose second file failed leaves neither.
          mmproj_pending = *mmproj_out + ".pair";
          const MmprojExportOptions mo{o->model_dir, mmproj_pending, tower_type_name, o->progress};
          mmproj_tensors = export_mmproj(mo);
        }
        GgufExportOptions g{o->model_dir, o->out_dir, o->weights, std::nullopt, o->progress};
        const ChatTemplate folder_template = ChatTemplate::from_model_dir(o->model_dir, "gemma3");
        if (!folder_template.is_builtin()) g.chat_template = folder_template.source();
        GgufExportSummary s;
        try {
          s = export_gguf(g);
        } catch (...) {
          std::error_code ec;
          if (!mmproj_pending.empty()) std::filesystem::remove(mmproj_pending, ec);
          throw;
        }
        if (!mmproj_pending.empty()) {
          std::error_code ec;
          std::filesystem::rename(mmproj_pending, *mmproj_out, ec);
          if (ec) {
            std::filesystem::remove(mmproj_pending, ec);
            throw FormatError(*mmproj_out + ": cannot move " + mmproj_pending + " into place");
          }
          std::printf("wrote %s (%s): %d tensors\n", mmproj_out->c_str(), tower_type_name.c_str(), mmproj_tensors);
        }
        std::printf("wrote %s (%s): %d tensors; %s -> %s\n", o->out_dir.c_str(), o->weights.c_str(), s.tensors,
                    format_bytes(s.bytes_in).c_str(), format_bytes(s.bytes_out).c_str());
        return 0;
      }
      if (!mmproj_out->empty()) throw InputError("--out-mmproj goes with --out FILE.gguf (the text model's GGUF)");
      const QuantizeSummary s = quantize_model(*o);
      std::printf("wrote %s (%s): %d matrices quantized, %d kept by --keep; %s -> %s\n", o->out_dir.c_str(), o->weights.c_str(),
                  s.quantized, s.kept, format_bytes(s.bytes_in).c_str(), format_bytes(s.bytes_out).c_str());
      return 0;
    };
  });
}

}  // namespace splitdec::cli
