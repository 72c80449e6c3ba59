// `splitdec export-onnx ...` runs the splitdec-export-onnx program installed
// beside this one, with the same arguments (apps/export_onnx_main.cpp says why
// the export lives in its own process).
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "cli_common.h"
#include "core/error.h"

namespace splitdec::cli {

void add_export_onnx(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("export-onnx",
                                 "write an ONNX Runtime package: --model DIR --out PKG [--max-length N] [--policy NAME] "
                                 "[--plan split|single] [--genai-route pipeline|multimodal]");
  cmd->prefix_command();  // every argument goes to the exporter, --help included
  cmd->set_help_flag();
  cmd->callback([cmd, &run] {
    run = [cmd]() -> int {
      const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
      const std::string helper = (self.parent_path() / "splitdec-export-onnx").string();
      std::vector<std::string> args = {helper};
      for (const auto& a : cmd->remaining()) args.push_back(a);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(helper.c_str(), argv.data());
      throw InputError("cannot run " + helper + " (it is built and installed beside splitdec)");
    };
  });
}

}  // namespace splitdec::cli
