// The bench/ target: the same benchmarks as `splitdec bench`.
#include <CLI/CLI.hpp>

#include "benchmarks.h"
#include "core/thread_pool.h"

int main(int argc, char** argv) {
  CLI::App app{"splitdec benchmarks"};
  splitdec::bench::BenchOptions o;
  int threads = 0;
  app.add_flag("--quick", o.quick, "finish in under two minutes");
  app.add_option("--json", o.json_path, "write results as JSON");
  app.add_option("--plot", o.plot_path, "write decode cost against context as SVG");
  app.add_option("--threads", threads, "worker threads (default: all cores)");
  app.add_option("--only", o.only, "sections to run: linear, decode_attention, plan_decode, prefill, media, audio_tower, whole_model, quantized, ttft, bf16_gemm, structured_output (comma-separated)");
  CLI11_PARSE(app, argc, argv);
  splitdec::ThreadPool::set_threads(threads);
  return splitdec::bench::run_benchmarks(o);
}
