#include "cli_common.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "core/thread_pool.h"

namespace splitdec::cli {

void SessionFlags::add_to(CLI::App& app) {
  app.add_option("--plan", plan, "single | split | split-copy | unified | reference (default split)");
  app.add_option("--policy", policy, "mask policy (default: the model family's)");
  app.add_option("--chunk", chunk, "prefill chunk size (default 256)");
  app.add_option("--max-length", max_length, "KV capacity in positions");
  app.add_flag("--trace", trace, "print each chunk and step: positions, path, KV bytes allocated/copied");
  app.add_flag("-v,--verbose", verbose, "report the KV cache size per layer type");
  app.add_option("--threads", threads, "worker threads (default: all cores)");
  app.add_option("--kv-dtype", kv_dtype, "KV cache storage of the shared buffer: f32 | bf16 | f16");
}

DType parse_dtype_flag(const std::string& flag, const std::string& value) {
  if (value == "f32") return DType::F32;
  if (value == "bf16") return DType::BF16;
  if (value == "f16") return DType::F16;
  throw InputError(flag + " " + value + " is not supported (f32, bf16, f16 are)");
}

SessionOptions SessionFlags::options(const ModelConfig& c, int64_t default_capacity) const {
  const DType kv = parse_dtype_flag("--kv-dtype", kv_dtype);
  if (threads < 0) throw InputError("--threads must be >= 0");
  ThreadPool::set_threads(threads);
  SessionOptions o;
  o.plan = parse_plan(plan);
  o.chunk = chunk;
  o.capacity = max_length > 0 ? max_length : default_capacity;
  o.policy = policy.empty() ? c.default_policy : parse_mask_policy(policy);
  o.progress = prefill_progress();
  o.kv_dtype = kv;
  return o;
}

void SamplingFlags::add_to(CLI::App& app) {
  app.add_option("--temperature", temperature, "sampling temperature (default: greedy)");
  app.add_option("--top-k", top_k, "keep the k most likely tokens");
  app.add_option("--top-p", top_p, "keep the smallest set whose probability reaches p");
  app.add_option("--min-p", min_p, "drop tokens below min-p times the top probability");
  app.add_option("--repetition-penalty", repetition_penalty, "penalise tokens already seen (HF rule)");
  app.add_option("--seed", seed, "sampling seed");
  app.add_option("--stop", stop, "stop string (repeatable)");
}

SamplingOptions SamplingFlags::options(const CLI::App& app) const {
  SamplingOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repetition_penalty = repetition_penalty;
  o.seed = seed;
  // Without sampling flags generation stays greedy.
  o.sample = (app.count("--temperature") && temperature > 0) || app.count("--top-k") || app.count("--top-p") ||
             app.count("--min-p");
  if (o.sample && !app.count("--temperature")) o.temperature = 1.f;
  o.validate();
  return o;
}

Model load_model(const std::string& dir) {
  if (!::isatty(2)) return Model::load(dir);
  Model m = Model::load(dir, [](size_t done, size_t total) {
    std::fprintf(stderr, "\rloading weights %zu/%zu", done + 1, total);
    std::fflush(stderr);
  });
  std::fprintf(stderr, "\r\033[K");
  return m;
}

std::function<void(int64_t, int64_t)> prefill_progress() {
  if (!::isatty(2)) return {};
  return [](int64_t done, int64_t total) {
    if (done < total) std::fprintf(stderr, "\rprefill %lld/%lld tokens", static_cast<long long>(done), static_cast<long long>(total));
    else std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

void print_memory(const Session& s) {
  const KvMemory m = s.memory();
  auto mib = [](size_t b) { return double(b) / (1 << 20); };
  std::fprintf(stderr, "plan %s, policy %s, capacity %lld, chunk %d\n", plan_name(s.options().plan),
               mask_policy_name(s.policy()), static_cast<long long>(s.options().capacity), s.options().chunk);
  std::fprintf(stderr,
               "KV cache: %d full layers x %lld positions = %.2f MiB; %d sliding layers x %lld-position rings = %.2f MiB; "
               "%d shared layers own none\n",
               m.full_layers, static_cast<long long>(m.full_slots), mib(m.full_bytes), m.sliding_layers,
               static_cast<long long>(m.sliding_slots), mib(m.sliding_bytes), m.shared_layers);
}

void print_trace(const std::vector<TraceEntry>& trace, size_t from) {
  for (size_t k = from; k < trace.size(); ++k) {
    const TraceEntry& e = trace[k];
    std::printf("trace %-7s positions [%lld, %lld) path %-10s kv allocated %lld B, copied %lld B\n",
                e.kind == TraceEntry::Prefill ? "prefill" : "decode", static_cast<long long>(e.begin),
                static_cast<long long>(e.end), path_name(e.path), static_cast<long long>(e.kv_bytes_allocated),
                static_cast<long long>(e.kv_bytes_copied));
  }
}

}  // namespace splitdec::cli
