// splitdec bench: the design's performance claims, measured in one run.
#include "../bench/benchmarks.h"
#include "cli_common.h"
#include "core/thread_pool.h"

namespace splitdec::cli {

void add_bench(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("bench", "measure the plans, kernels and the machine (see docs/benchmarks.md)");
  auto o = std::make_shared<bench::BenchOptions>();
  auto threads = std::make_shared<int>(0);
  cmd->add_flag("--quick", o->quick, "finish in under two minutes");
  cmd->add_option("--json", o->json_path, "write results as JSON");
  cmd->add_option("--plot", o->plot_path, "write decode cost against context as SVG");
  cmd->add_option("-t,--threads", *threads, "worker threads, 0 for all cores (default)")
      ->transform(integer_in(0, kMaxThreadsFlag));
  cmd->add_option("--only", o->only,
                  "sections to run: linear, decode_attention, plan_decode, prefill, media, whole_model, quantized, ttft (comma-separated)");
  cmd->add_option("-m,--model", o->model_dir,
                  "also run section 'folder': decode steps at 1K and 4K context on this model folder against its weight floor");
  cmd->add_option("--weights", o->weights, "how --model's weights load (as generate's --weights)");
  auto kv_dtype = std::make_shared<std::string>();
  cmd->add_option("--kv-dtype", *kv_dtype, "KV storage for --model's rows: f32 | bf16 | f16 | q8 (default f32; llama.cpp's is f16)");
  cmd->add_option("--work-dir", o->work_dir, "where generated benchmark models go (default: a temporary directory)");
  cmd->callback([o, threads, kv_dtype, &run_fn] {
    run_fn = [o, threads, kv_dtype] {
      if (!kv_dtype->empty()) o->kv_storage = flag_value("--kv-dtype", *kv_dtype, parse_kv_storage);
      ThreadPool::set_threads(*threads);
      return bench::run_benchmarks(*o);
    };
  });
}

}  // namespace splitdec::cli
