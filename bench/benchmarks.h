// `splitdec bench`: every performance claim of the design measured in one
// run, as ratios on the same machine (see docs/benchmarks.md).
#pragma once

#include <string>

#include "splitdec/splitdec.h"

namespace splitdec::bench {

struct BenchOptions {
  bool quick = false;       // under two minutes on a 2-core machine
  std::string json_path;    // results as JSON (schema in docs/benchmarks.md)
  std::string plot_path;    // decode cost against context per plan, SVG
  std::string work_dir;     // where generated models go (default: a temp dir)
  std::string only;         // section names to run (e.g. "prefill,linear"; empty: all); machine always runs
  std::string model_dir;    // section "folder": decode on this model folder against its weight floor
  std::string weights;      // how that folder's weights load (LoadOptions::weights)
  KvStorage kv_storage = ConversationOptions{}.kv_dtype;  // that folder's KV storage (default: generate's and serve's)
};

int run_benchmarks(const BenchOptions& options);

}  // namespace splitdec::bench
