// splitdec-export-onnx: writes an ONNX Runtime package of a model (see
// src/onnx_export/onnx_package.h). `splitdec export-onnx` runs this program.
//
// Why a program of its own: Debian's libsentencepiece carries a private copy
// of protobuf whose symbols clash with the system libprotobuf that libonnx's
// ONNX classes need; one process cannot load both. This program links no
// tokenizer (the export needs none) and so holds only the system protobuf.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "model/gemma_model.h"
#include "onnx_export/genai_files.h"
#include "onnx_export/media_graphs.h"
#include "onnx_export/onnx_package.h"

int main(int argc, char** argv) {
  using namespace splitdec;
  CLI::App app{"splitdec export-onnx: write an ONNX Runtime package (split: prefill + GQA decode graphs)"};
  app.name("splitdec export-onnx");
  std::string model_dir, out, policy, plan = "split", route = "pipeline", weights;
  int64_t max_length = 4096;
  app.add_option("-m,--model", model_dir, "model directory")->required();
  app.set_version_flag("--version", "splitdec " SPLITDEC_VERSION);
  app.add_option("--out", out, "package directory to write")->required();
  app.add_option("--max-length", max_length, "length of the shared KV buffers / context (default 4096)");
  app.add_option("--policy", policy, "mask policy (default: the model family's)");
  app.add_option("--plan", plan, "split | single (default split)");
  app.add_option("--weights", weights,
                 "convert the weights on load, as generate's --weights does (q8, q4, q8-f32act, q4-f32act); Q8_0 and "
                 "Q4_0 matrices, converted or as the model holds them, are written as MatMulNBits blocks, the rest "
                 "as f32 (default: the model's formats)");
  app.add_option("--genai-route", route,
                 "pipeline: a decoder-pipeline package, the caller binds media rows (default); multimodal: ONNX "
                 "Runtime GenAI's own Gemma-3 / Gemma-4 route (its processor and vision.onnx; stock GenAI runs --plan single, "
                 "the split plan needs contrib/onnxruntime-genai)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; every other parse error is a user error: one line, exit 1.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "splitdec: error: %s (see --help)\n", e.what());
    return 1;
  }
  try {
    OnnxExportOptions o;
    o.max_length = max_length;
    o.plan = parse_package_kind(plan);
    if (!policy.empty()) o.policy = parse_mask_policy(policy);
    o.genai_route = parse_genai_route(route);
    o.model_dir = model_dir;
    check_onnx_export_options(o);  // before loading a model that may be large
    check_onnx_exportable(load_model_config(model_dir));
    if (o.genai_route == GenaiRoute::Multimodal) onnx_export::require_tokenizer_files(model_dir);
    const WeightLoading loading = weight_loading_named(weights);  // before loading: a wrong name is quick to report
    const Model model = Model::load(model_dir, {}, loading);
    // The media frontends' graphs, when the checkpoint has their weights.
    const onnx_export::ExportFrontends frontends = onnx_export::load_export_frontends(model_dir, model.config());
    const OnnxPackage pkg = export_onnx_package(model, out, o, &frontends);
    std::printf("wrote %s (plan %s, GenAI route %s, max_length %lld, weights %.1f MiB):", out.c_str(),
                package_kind_name(o.plan), genai_route_name(o.genai_route), static_cast<long long>(o.max_length),
                double(pkg.weight_bytes) / (1 << 20));
    for (const auto& file : pkg.files) std::printf(" %s", file.c_str());
    std::printf("\n");
    if (std::find(pkg.files.begin(), pkg.files.end(), "tokenizer.json") == pkg.files.end())
      std::fprintf(stderr, "splitdec: note: %s has no tokenizer.json / tokenizer_config.json to copy; ONNX Runtime GenAI's "
                   "tokenizer needs both in the package folder\n", model_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "splitdec: error: %s\n", e.what());
    return 1;
  }
}
