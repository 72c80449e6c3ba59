#include "benchmarks.h"

#include <cblas.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <random>
#include <stdexcept>

#include "core/aligned_vector.h"
#include "core/thread_pool.h"
#include "generate/generator.h"
#include "kernels/attention.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/simd/kernel_table.h"
#include "kv/kv_rows.h"
#include "mask/chunk_mask.h"
#include "tools/make_model.h"
#include "pipeline/session.h"
#include "constraint_benchmarks.h"
#include "media_benchmarks.h"
#include "read_floor.h"
#include "svg_plot.h"
#include "synthetic_past.h"

extern "C" void openblas_set_num_threads(int);

namespace splitdec::bench {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of `fn` over repetitions (at least `min_reps`, up to `budget_s`).
double median_time(const std::function<void()>& fn, int min_reps = 3, double budget_s = 0.5) {
  std::vector<double> t;
  const double start = now_s();
  while (int(t.size()) < min_reps || (now_s() - start < budget_s && t.size() < 50)) {
    const double t0 = now_s();
    fn();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Block formats with int8 activations, as --weights q8 / q4 load them.
WeightMatrix random_matrix(int out, int in, WeightFormat format, uint32_t seed) {
  const auto f = random_floats(size_t(out) * size_t(in), seed);
  WeightMatrix m = WeightMatrix::from_f32(format, out, in, f.data());
  m.int8_activations = weight_format_is_blocked(format);
  return m;
}

// Fastest of `reps` runs: the machine's capability, for the bandwidth probe.
double best_time(const std::function<void()>& fn, int reps) {
  double best = 1e300;
  for (int k = 0; k < reps; ++k) {
    const double t0 = now_s();
    fn();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

void section(const char* title) { std::printf("\n== %s\n", title); }

// Fastest of `reps` reads of the whole buffer, by one thread or split over
// all; each part is read as two streams side by side with the kernels' 1 KiB
// prefetch (read_streams), the fastest plain read measured (one stream per
// thread without it read 20-35% slower on a Xeon).
double read_seconds(const std::vector<float>& buf, bool all_threads, int reps) {
  const std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  const size_t bytes = buf.size() * sizeof(float);
  const char* base = reinterpret_cast<const char*>(buf.data());
  const int parts = all_threads ? pool->size() : 1;
  return best_time(
      [&] {
        pool->parallel_for(parts, [&](int64_t a, int64_t b) {
          for (int64_t p = a; p < b; ++p) {
            const size_t lo = bytes * size_t(p) / size_t(parts) / 64 * 64, hi = bytes * size_t(p + 1) / size_t(parts) / 64 * 64;
            const size_t half = (hi - lo) / 2 / 64 * 64;  // a part's last 64 bytes may go unread
            read_streams(base + lo, base + lo + half, half);
          }
        });
      },
      reps);
}

// Read bandwidth with every thread over a buffer of 256 MiB. The buffer
// lives as long as the probe, so that a row's peak RSS can be taken without
// it.
class BandwidthProbe {
 public:
  BandwidthProbe() : buf_(size_t(64) << 20, 1.f) {}
  // One pass, for pairing with one run of a kernel (against_floor).
  double once_gbs() const { return double(buf_.size()) * 4 / read_seconds(buf_, true, 1) / 1e9; }

 private:
  std::vector<float> buf_;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A kernel against its floor, alternated `reps` times so that each fraction
// floor / kernel time is taken at one moment: the machines are shared and
// their bandwidth moved by 2x within minutes, so a floor probed once before
// (or the best of a few probes against a median kernel time) misstates it.
// Medians of the kernel time, the floor and the fractions.
struct AgainstFloor {
  double kernel_s, floor_s, fraction;
};
AgainstFloor against_floor(const std::function<double()>& floor_s, const std::function<void()>& kernel, int reps) {
  std::vector<double> k, f, r;
  for (int i = 0; i < reps; ++i) {
    const double fl = floor_s();
    const double t0 = now_s();
    kernel();
    const double t = now_s() - t0;
    k.push_back(t), f.push_back(fl), r.push_back(fl / t);
  }
  return {median_of(k), median_of(f), median_of(r)};
}

// ---- the machine -----------------------------------------------------------

json machine(bool quick) {
  section("machine");
  const std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  const simd::KernelTable& t = simd::best();
  std::vector<float> buf(((quick ? 256ull : 1024ull) << 20) / 4, 1.f);
  const double bytes = double(buf.size()) * 4;
  const double t1 = read_seconds(buf, false, 5), tn = read_seconds(buf, true, 5);
  buf = std::vector<float>();  // freed (= {} would keep the capacity)
  // Peak f32 GEMM: one single-threaded sgemm per core on its own matrices.
  const int g = 1024;
  std::vector<std::vector<float>> A, B, C;
  for (int k = 0; k < pool->size(); ++k) {
    A.push_back(random_floats(size_t(g) * g, 1 + k));
    B.push_back(random_floats(size_t(g) * g, 100 + k));
    C.emplace_back(size_t(g) * g);
  }
  openblas_set_num_threads(1);
  const double tg = median_time(
      [&] {
        pool->parallel_for(pool->size(), [&](int64_t a, int64_t b) {
          for (int64_t k = a; k < b; ++k)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g, g, g, 1.f, A[size_t(k)].data(), g, B[size_t(k)].data(), g,
                        0.f, C[size_t(k)].data(), g);
        });
      },
      2, 0.5);
  const double peak = 2.0 * g * g * g * pool->size() / tg / 1e9;
  json j = {{"simd", t.name},
            {"threads", pool->size()},
            {"buffer_bytes", bytes},
            {"read_bandwidth_gbs_1_thread", bytes / t1 / 1e9},
            {"read_bandwidth_gbs_all_threads", bytes / tn / 1e9},
            {"peak_f32_gemm_gflops", peak}};
  std::printf("simd %s, %d threads\n", t.name, pool->size());
  std::printf("read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (all threads)\n", bytes / t1 / 1e9, bytes / tn / 1e9);
  std::printf("peak f32 GEMM (OpenBLAS sgemm per core): %.1f GFLOP/s\n", peak);
  return j;
}

// ---- linear layers -----------------------------------------------------------

json linear_layers(const json& m, bool quick) {
  section("linear layers (prefill 4096 x 4096, decode 16384 x 4096)");
  const double peak = m["peak_f32_gemm_gflops"];
  json out = json::array();
  const int rows_prefill = quick ? 256 : 512;
  for (WeightFormat format : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    const char* name = weight_format_name(format);
    const WeightMatrix w = random_matrix(4096, 4096, format, 7);
    const std::vector<float> xs = random_floats(size_t(rows_prefill) * 4096, 8);
    const AlignedVector<float> x(xs.begin(), xs.end());  // as the runtime's activations
    AlignedVector<float> y(size_t(rows_prefill) * 4096);
    const double tp = median_time([&] { linear(x.data(), rows_prefill, w, y.data()); }, 2, 0.5);
    // Decode reads a matrix four times larger than the last-level cache.
    const WeightMatrix big = random_matrix(16384, 4096, format, 9);
    std::vector<float> ybig(16384);
    const BandwidthProbe probe;
    const AgainstFloor d = against_floor([&] { return double(big.bytes()) / (probe.once_gbs() * 1e9); },
                                         [&] { linear(x.data(), 1, big, ybig.data()); }, 9);
    const double td = d.kernel_s, bw = double(big.bytes()) / d.floor_s / 1e9;
    const double gflops = 2.0 * rows_prefill * 4096.0 * 4096.0 / tp / 1e9;
    const double gbs = double(big.bytes()) / td / 1e9;
    std::printf("%-4s weights: prefill %d rows %.1f GFLOP/s (%.0f%% of peak); decode matvec %.2f ms, %.1f GB/s (%.0f%% of bandwidth)\n",
                name, rows_prefill, gflops, 100 * gflops / peak, td * 1e3, gbs, 100 * d.fraction);
    out.push_back({{"dtype", name}, {"prefill_rows", rows_prefill}, {"prefill_gflops", gflops},
                   {"prefill_fraction_of_peak", gflops / peak}, {"decode_ms", td * 1e3}, {"decode_gbs", gbs},
                   {"decode_fraction_of_bandwidth", d.fraction}, {"bandwidth_gbs", bw}});
  }
  return out;
}

// ---- decode-step attention at Gemma-4-12B layer shapes -----------------------

// Peak RSS helpers (defined with the whole-model rows below).
void reset_peak_rss();
double peak_rss_mib();

json decode_attention(const json& m, bool quick) {
  section("decode-step attention, Hq=16 Hkv=8 (GQA path)");
  (void)m;
  json out = json::array();
  std::vector<int> contexts = quick ? std::vector<int>{1024, 4096, 16384} : std::vector<int>{1024, 4096, 16384, 32768};
  std::printf("%8s %6s %6s %10s %12s %10s %10s %14s\n", "context", "hd", "KV", "ms", "read ms", "of read", "read GB/s", "peak RSS MiB");
  for (DType kv_dtype : {DType::F32, DType::BF16, DType::F16, DType::I8})
  for (int hd : {256, 512})
    for (int ctx : contexts) {
      const int Hkv = 8, Hq = 16;
      // Cache-line aligned, as the runtime's KV cache and activations are.
      const auto aligned = [](const std::vector<float>& x) { return AlignedVector<float>(x.begin(), x.end()); };
      AlignedVector<float> k = aligned(random_floats(size_t(Hkv) * ctx * hd, 1)), v = aligned(random_floats(size_t(Hkv) * ctx * hd, 2));
      AlignedVector<float> q = aligned(random_floats(size_t(Hq) * hd, 3)), o(q.size());
      AlignedVector<uint16_t> k16, v16;
      AlignedVector<int8_t> k8, v8;
      std::vector<float> ks, vs;
      KvView kv{k.data(), v.data(), 1, Hkv, hd, ctx, false};
      // The stored K and V rows as bytes, for the floor's plain read.
      const char* kb = reinterpret_cast<const char*>(k.data());
      const char* vb = reinterpret_cast<const char*>(v.data());
      if (kv_dtype == DType::BF16 || kv_dtype == DType::F16) {
        const bool f16 = kv_dtype == DType::F16;
        uint16_t (*const to16)(float) = f16 ? f32_to_f16 : f32_to_bf16;
        k16.resize(k.size()), v16.resize(v.size());
        for (size_t x = 0; x < k.size(); ++x) k16[x] = to16(k[x]), v16[x] = to16(v[x]);
        k = AlignedVector<float>(), v = AlignedVector<float>();  // frees them (= {} would keep the capacity)
        kv = {nullptr, nullptr, 1, Hkv, hd, ctx, false, k16.data(), v16.data(), f16};
        kb = reinterpret_cast<const char*>(k16.data()), vb = reinterpret_cast<const char*>(v16.data());
      } else if (kv_dtype == DType::I8) {  // --kv-dtype q8: int8 rows, one f32 scale each
        k8.resize(k.size()), v8.resize(v.size()), ks.resize(k.size() / size_t(hd)), vs.resize(ks.size());
        for (size_t r = 0; r < ks.size(); ++r)
          ks[r] = quantize_kv_row(k.data() + r * size_t(hd), hd, k8.data() + r * size_t(hd)),
          vs[r] = quantize_kv_row(v.data() + r * size_t(hd), hd, v8.data() + r * size_t(hd));
        k = AlignedVector<float>(), v = AlignedVector<float>();
        kv = {nullptr, nullptr, 1, Hkv, hd, ctx, false};
        kv.k8 = k8.data(), kv.v8 = v8.data(), kv.k_scale = ks.data(), kv.v_scale = vs.data();
        kb = reinterpret_cast<const char*>(k8.data()), vb = reinterpret_cast<const char*>(v8.data());
      }
      const QueryBlock qb{q.data(), 1, 1, Hq, hd, ctx - 1, 1.f / 16};
      const int64_t start = 0;
      reset_peak_rss();  // the KV in its storage type, not the f32 it was made from
      gqa_attention(qb, kv, 0, &start, o.data());  // warm-up
      const double rss = peak_rss_mib();
      // The floor: the same K and V rows read once by the same threads, one
      // KV head per task as the kernel splits them (q8's row scales, 4 bytes
      // a row, are counted in the bytes but not read).
      const size_t head_bytes = size_t(ctx) * size_t(hd) * dtype_size(kv_dtype);
      const double bytes = 2.0 * Hkv * ctx * double(kv_row_bytes(kv_dtype, hd));
      const double rows_share = bytes / (2.0 * Hkv * double(head_bytes));
      auto read_kv = [&] {
        const double t0 = now_s();
        ThreadPool::global()->parallel_for(Hkv, [&](int64_t h0, int64_t h1) {
          for (int64_t h = h0; h < h1; ++h) read_streams(kb + size_t(h) * head_bytes, vb + size_t(h) * head_bytes, head_bytes);
        });
        return (now_s() - t0) * rows_share;
      };
      const AgainstFloor a = against_floor(read_kv, [&] { gqa_attention(qb, kv, 0, &start, o.data()); }, quick ? 9 : 15);
      const char* name = kv_dtype == DType::I8 ? "q8" : dtype_name(kv_dtype);
      std::printf("%8d %6d %6s %10.3f %12.3f %9.0f%% %10.1f %14.0f\n", ctx, hd, name, a.kernel_s * 1e3, a.floor_s * 1e3,
                  100 * a.fraction, bytes / a.floor_s / 1e9, rss);
      out.push_back({{"context", ctx}, {"head_dim", hd}, {"kv_dtype", name}, {"ms", a.kernel_s * 1e3}, {"kv_bytes", bytes},
                     {"floor_ms", a.floor_s * 1e3}, {"fraction_of_floor", a.fraction}, {"bandwidth_gbs", bytes / a.floor_s / 1e9},
                     {"peak_rss_mib", rss}});
    }
  return out;
}

// ---- per-token decode cost of each plan ---------------------------------------

PromptBatch synthetic_prompt(const ModelConfig& c, int length, bool image, int image_tokens = 280) {
  PromptBatch p;
  p.batch = 1;
  p.seq = length;
  std::mt19937 rng(9);
  for (int k = 0; k < length; ++k) {
    p.tokens.push_back(20 + int(rng() % uint32_t(std::min(1000, c.vocab_size - 20))));
    p.modality.push_back(Modality::Text);
  }
  if (image) {  // an image (280 tokens unless told) in the middle, with its markers
    if (length < image_tokens + 3) throw std::invalid_argument("synthetic_prompt: the image does not fit the prompt");
    const int at = std::min(length / 2, length - image_tokens - 2);  // the image and its markers lie inside
    p.tokens[size_t(at)] = c.boi_token_id;
    for (int k = 1; k <= image_tokens; ++k) p.tokens[size_t(at + k)] = c.image_token_id, p.modality[size_t(at + k)] = Modality::Image;
    p.tokens[size_t(at + image_tokens + 1)] = c.eoi_token_id;
  }
  p.attention_mask.assign(size_t(length), 1);
  return p;
}

// Time to first token on the Gemma-4-12B attention stack (6 layers, narrow
// residual stream): a prompt of S tokens, text only or with one 1120-token
// image in the middle (its media rows synthetic: the frontend is in the media
// section), prefilled by the split plan in chunks of 256, then the first
// decode step. Peak RSS per row.
json time_to_first_token(const Model& model, bool quick) {
  section("time to first token, Gemma-4-12B attention stack (6 layers), split plan");
  json out = json::array();
  std::vector<int> lengths = quick ? std::vector<int>{2048} : std::vector<int>{2048, 8192, 32768};
  std::printf("%8s %8s %12s %14s %12s %14s\n", "S", "image", "TTFT ms", "prefill tok/s", "first step", "peak RSS MiB");
  for (int S : lengths)
    for (bool image : {false, true}) {
      reset_peak_rss();
      PromptBatch p = synthetic_prompt(model.config(), S, image, 1120);
      if (image) p.media.assign(size_t(1120) * size_t(model.config().hidden_size), 0.01f);
      SessionOptions o;
      o.plan = Plan::Split;
      o.capacity = S + 16;
      o.chunk = 256;
      Session s(model, 1, o);
      const double t0 = now_s();
      s.append(p);
      const double t1 = now_s();
      s.decode({40});
      const double t2 = now_s(), rss = peak_rss_mib();
      std::printf("%8d %8s %12.1f %14.1f %10.1fms %14.0f\n", S, image ? "1120" : "-", (t2 - t0) * 1e3, S / (t1 - t0), (t2 - t1) * 1e3, rss);
      out.push_back({{"S", S}, {"image_tokens", image ? 1120 : 0}, {"ttft_ms", (t2 - t0) * 1e3}, {"prefill_ms", (t1 - t0) * 1e3},
                     {"prefill_tokens_per_s", S / (t1 - t0)}, {"first_step_ms", (t2 - t1) * 1e3}, {"peak_rss_mib", rss}});
    }
  return out;
}

json plan_decode(const Model& model, bool quick, std::vector<Series>& plot) {
  section("per-token decode cost of each plan (Gemma-4-12B attention shapes, 6 layers)");
  json out = json::array();
  const std::vector<Plan> plans = {Plan::Single, Plan::SplitCopy, Plan::Split, Plan::Unified};
  std::vector<int> contexts = quick ? std::vector<int>{1024, 4096} : std::vector<int>{1024, 4096, 16384, 32768};
  std::printf("%12s %8s %8s %12s %18s %14s\n", "plan", "context", "prompt", "ms/token", "KV bytes/token", "peak RSS MiB");
  for (Plan plan : plans) {
    Series s{plan_name(plan), {}, {}};
    for (int ctx : contexts)
    {
      // Prefill for real where it is affordable (a text prompt and one with
      // an image, decoded in alternation so that machine drift hits both
      // alike); beyond that the past is synthetic (decode cost does not
      // depend on the values in the cache, nor on the past's modality).
      const bool real = ctx <= (quick ? 1024 : 4096);
      reset_peak_rss();  // both sessions of this context (text and image) together
      std::vector<std::unique_ptr<Session>> sessions;
      for (bool image : {false, true}) {
        if (!real && image) continue;
        SessionOptions o;
        o.plan = plan;
        o.capacity = ctx + 48;
        sessions.push_back(std::make_unique<Session>(model, 1, o));
        if (real) sessions.back()->append(synthetic_prompt(model.config(), ctx, image));
        else fill_synthetic(*sessions.back(), 0, ctx);
        // Warm-up: the first steps fault in fresh pages (and `single` grows
        // its two recycled present buffers); that is not a per-token cost.
        for (int k = 0; k < 3; ++k) sessions.back()->decode({26 + k});
      }
      std::vector<std::vector<double>> times(sessions.size());
      const int steps = ctx >= 16384 ? 3 : 9;
      for (int k = 0; k < steps; ++k)
        for (size_t v = 0; v < sessions.size(); ++v) {
          const double t0 = now_s();
          sessions[v]->decode({30 + k});
          times[v].push_back(now_s() - t0);
        }
      const double rss = peak_rss_mib();
      for (size_t v = 0; v < sessions.size(); ++v) {
        const bool image = v == 1;
        std::sort(times[v].begin(), times[v].end());
        const double ms = times[v][times[v].size() / 2] * 1e3;
        const TraceEntry& last = sessions[v]->trace().back();
        const double kv_bytes = double(last.kv_bytes_allocated + last.kv_bytes_copied);
        std::printf("%12s %8d %8s %12.2f %18.0f %14.0f\n", plan_name(plan), ctx, image ? "image" : "text", ms, kv_bytes, rss);
        out.push_back({{"plan", plan_name(plan)}, {"context", ctx}, {"prompt", image ? "image" : "text"},
                       {"prefill", real ? "real" : "synthetic"}, {"ms_per_token", ms}, {"kv_bytes_per_token", kv_bytes},
                       {"peak_rss_mib", rss}});
        if (!image) s.x.push_back(ctx), s.y.push_back(ms);
      }
    }
    plot.push_back(s);
  }
  return out;
}

// ---- prefill attention: flash tiles against the rowwise kernel and dense-bias ----

// Peak f32 GEMM right now: one single-threaded OpenBLAS sgemm (1024^3) per
// pool thread, best of `reps`. Taken right before the rows that are reported
// as a fraction of it, since the machines are shared and drift.
double probe_gemm_peak_gflops(int reps) {
  const std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  const int g = 1024;
  static std::vector<std::vector<float>> A, B, C;
  while (int(A.size()) < pool->size()) {
    A.push_back(random_floats(size_t(g) * g, 1 + uint32_t(A.size())));
    B.push_back(random_floats(size_t(g) * g, 100 + uint32_t(B.size())));
    C.emplace_back(size_t(g) * g);
  }
  openblas_set_num_threads(1);
  const double t = best_time(
      [&] {
        pool->parallel_for(pool->size(), [&](int64_t a, int64_t b) {
          for (int64_t k = a; k < b; ++k)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g, g, g, 1.f, A[size_t(k)].data(), g, B[size_t(k)].data(), g, 0.f,
                        C[size_t(k)].data(), g);
        });
      },
      reps);
  return 2.0 * g * g * g * pool->size() / t / 1e9;
}

// Useful multiply-adds of attention over these intervals: QK^T and PV, 2
// flops each, per visible (row, key) pair and query head.
double attention_flops(const std::vector<KeyInterval>& iv, int heads, int hd) {
  double pairs = 0;
  for (const KeyInterval& k : iv) pairs += double(std::max<int64_t>(0, k.end - k.begin));
  return 4.0 * pairs * heads * hd;
}

struct LayerInputs {
  std::vector<float> q, k, v, o;
  KvView kv;
  QueryBlock qb;
};

LayerInputs layer_inputs(int S, int Hq, int Hkv, int hd) {
  LayerInputs in;
  in.q = random_floats(size_t(S) * Hq * hd, 1), in.k = random_floats(size_t(Hkv) * S * hd, 2);
  in.v = random_floats(size_t(Hkv) * S * hd, 3), in.o.resize(in.q.size());
  in.kv = KvView{in.k.data(), in.v.data(), 1, Hkv, hd, S, false};
  in.qb = QueryBlock{in.q.data(), 1, S, Hq, hd, 0, 1.f / std::sqrt(float(hd))};
  return in;
}

json prefill_attention(bool quick) {
  section("prefill attention, one layer Hq=16 Hkv=8 hd=256, gemma3 mask (causal OR block): flash tiles vs rowwise vs dense-bias");
  json out = json::array();
  // Rowwise (the per-key kernel the tiles replaced) and dense-bias are slow:
  // dense-bias runs to 8K (full run) and rowwise at 32K once, for one image size.
  const std::vector<int> sizes = quick ? std::vector<int>{2048, 8192} : std::vector<int>{2048, 8192, 32768};
  const double peak = probe_gemm_peak_gflops(3);
  std::printf("GEMM peak now (OpenBLAS sgemm per thread, best of 3): %.1f GFLOP/s\n", peak);
  std::printf("%6s %6s %10s %8s %7s %11s %8s %7s %10s %8s %15s %14s %9s\n", "S", "image", "flash ms", "GFLOP/s", "of peak", "rowwise ms",
              "GFLOP/s", "of peak", "dense ms", "flash x", "mask bytes", "bias bytes", "peak RSS");
  for (int S : sizes)
    for (int image : {256, 1100}) {
      const bool run_rowwise = S <= 8192 ? (!quick || S == 2048 || image == 1100) : image == 1100;
      const bool run_dense = S == 2048 || (!quick && S == 8192);
      if (quick && S > 2048 && image != 1100) continue;
      const int Hq = 16, Hkv = 8, hd = 256;
      reset_peak_rss();  // the row's inputs, mask or bias and outputs
      LayerInputs in = layer_inputs(S, Hq, Hkv, hd);
      std::vector<std::vector<int>> blocks(1, std::vector<int>(size_t(S), -1));
      for (int j = S / 4; j < S / 4 + image; ++j) blocks[0][size_t(j)] = 0;  // an image a quarter in
      const int64_t start = 0;
      const ChunkMaskInput mask_in{0, S, 1, &blocks, &start};
      const LayerMaskRule rule = layer_mask_rule(MaskPolicy::Gemma3, LayerType::Full, 0);
      const std::vector<KeyInterval> iv = chunk_row_intervals(rule, mask_in);
      const double flops = attention_flops(iv, Hq, hd);
      const double mask_bytes = double(iv.size() * sizeof(KeyInterval)), bias_bytes = double(S) * double(S) * sizeof(float);
      const int reps = S <= 2048 ? 3 : 1;
      // The masked path as the session runs it: intervals built, then the tiles.
      const double tf = median_time([&] { masked_prefill_attention(in.qb, in.kv, chunk_row_intervals(rule, mask_in).data(), in.o.data()); },
                                    reps, 0.0);
      double tr = 0, td = 0;
      if (run_rowwise) tr = median_time([&] { rowwise_prefill_attention(in.qb, in.kv, iv.data(), in.o.data()); }, reps, 0.0);
      if (run_dense)
        td = median_time([&] { dense_bias_attention(in.qb, in.kv, chunk_dense_bias(rule, mask_in).data(), in.o.data()); }, 1, 0.0);
      const double gf = flops / tf / 1e9, gr = tr > 0 ? flops / tr / 1e9 : 0, rss = peak_rss_mib();
      auto cell = [](double v, const char* fmt) {
        char b[32];
        if (v > 0) std::snprintf(b, sizeof b, fmt, v);
        else std::snprintf(b, sizeof b, "-");
        return std::string(b);
      };
      std::printf("%6d %6d %10.1f %8.1f %6.0f%% %11s %8s %7s %10s %8s %15.0f %14.0f %5.0f MiB%s\n", S, image, tf * 1e3, gf, 100 * gf / peak,
                  cell(tr * 1e3, "%.1f").c_str(), cell(gr, "%.1f").c_str(), cell(100 * gr / peak, "%.0f%%").c_str(),
                  cell(td * 1e3, "%.1f").c_str(), cell(tr / tf, "%.1fx").c_str(), mask_bytes, bias_bytes, rss,
                  run_dense ? "" : " (bias not built)");
      auto opt = [](double v) { return v > 0 ? json(v) : json(nullptr); };
      out.push_back({{"S", S}, {"image_tokens", image}, {"flops", flops}, {"gemm_peak_gflops", peak},
                     {"masked_ms", tf * 1e3}, {"masked_gflops", gf}, {"masked_fraction_of_peak", gf / peak},
                     {"rowwise_ms", opt(tr * 1e3)}, {"rowwise_gflops", opt(gr)}, {"rowwise_fraction_of_peak", opt(gr / peak)},
                     {"masked_speedup_vs_rowwise", opt(tr / tf)}, {"dense_bias_ms", opt(td * 1e3)}, {"speedup", opt(td / tf)},
                     {"masked_mask_bytes", mask_bytes}, {"dense_bias_bytes", bias_bytes}, {"peak_rss_mib", rss}});
    }
  return out;
}

// Gemma-4-12B's two layer kinds, as the split plan runs a text prompt: the
// sliding layer (head_dim 256, window 1024) and the full layer (head_dim
// 512, causal), through the multi-token GQA path (flash tiles), against the
// rowwise kernel on the same intervals.
json prefill_layers(bool quick) {
  section("prefill attention, Gemma-4-12B layers (Hq=16 Hkv=8), text prompt through the GQA path");
  json out = json::array();
  const double peak = probe_gemm_peak_gflops(3);
  std::printf("GEMM peak now: %.1f GFLOP/s\n", peak);
  std::printf("%8s %6s %6s %8s %10s %8s %7s %11s %8s %10s\n", "layer", "S", "hd", "window", "flash ms", "GFLOP/s", "of peak", "rowwise ms", "flash x",
              "peak RSS");
  struct Row { const char* layer; int S, hd, window; bool rowwise; };
  std::vector<Row> rows = {{"sliding", 8192, 256, 1024, true}, {"full", 8192, 512, 0, !quick}};
  if (!quick) rows.push_back({"sliding", 32768, 256, 1024, true});
  for (const Row& r : rows) {
    reset_peak_rss();
    LayerInputs in = layer_inputs(r.S, 16, 8, r.hd);
    const int64_t start = 0;
    std::vector<KeyInterval> iv(size_t(r.S));
    for (int i = 0; i < r.S; ++i) iv[size_t(i)] = {r.window ? std::max(0, i - r.window + 1) : 0, i + 1};
    const double flops = attention_flops(iv, 16, r.hd);
    const double tf = median_time([&] { gqa_attention(in.qb, in.kv, r.window, &start, in.o.data()); }, 1, 0.0);
    const double tr = r.rowwise ? median_time([&] { rowwise_prefill_attention(in.qb, in.kv, iv.data(), in.o.data()); }, 1, 0.0) : 0;
    const double gf = flops / tf / 1e9, rss = peak_rss_mib();
    std::printf("%8s %6d %6d %8d %10.1f %8.1f %6.0f%% %11.1f %7.1fx %6.0f MiB\n", r.layer, r.S, r.hd, r.window, tf * 1e3, gf, 100 * gf / peak,
                tr * 1e3, tr / tf, rss);
    out.push_back({{"layer", r.layer}, {"S", r.S}, {"head_dim", r.hd}, {"window", r.window}, {"flops", flops}, {"gemm_peak_gflops", peak},
                   {"flash_ms", tf * 1e3}, {"flash_gflops", gf}, {"flash_fraction_of_peak", gf / peak},
                   {"rowwise_ms", tr > 0 ? json(tr * 1e3) : json(nullptr)}, {"flash_speedup_vs_rowwise", tr > 0 ? json(tr / tf) : json(nullptr)},
                   {"peak_rss_mib", rss}});
  }
  return out;
}

// ---- whole model -------------------------------------------------------------------

// Peak RSS of this process since the last reset_peak_rss(): Linux resets the
// high-water mark when "5" is written to /proc/self/clear_refs, so each row
// reports its own peak rather than the largest one so far.
// Freed heap goes back to the system first (malloc_trim), so that what an
// earlier row or make_model allocated is not counted again.
void reset_peak_rss() {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0;
}

// Decode steps of the session's lockstep sequences against the weight-bandwidth floor (every
// weight byte read once), each step paired with one pass of the bandwidth
// probe (against_floor). The peak RSS is taken after a warm-up step, before
// the probe's buffer exists.
struct FloorStep {
  double step_s;         // median step
  double floor_s;        // the weights at the median probed bandwidth
  double bandwidth_gbs;  // that median
  double fraction;       // median of the paired floor / step
  double peak_rss_mib;
};
// A step decodes one token for each of the session's lockstep sequences.
FloorStep decode_steps_against_floor(Session& session, double weight_bytes) {
  const size_t batch = size_t(session.batch());
  session.decode(std::vector<int>(batch, 39));  // warm-up
  const double rss = peak_rss_mib();
  const BandwidthProbe probe;
  int token = 40;
  const AgainstFloor a = against_floor([&] { return weight_bytes / (probe.once_gbs() * 1e9); },
                                       [&] { session.decode(std::vector<int>(batch, token++)); }, 8);
  return {a.kernel_s, a.floor_s, weight_bytes / a.floor_s / 1e9, a.fraction, rss};
}

// The weight bytes one decode step of one token reads: every resident
// matrix, except that of each layer's experts only the router's top_k are
// read; plus the token's rows of the per-layer table (the table itself
// stays in the file).
double decode_weight_bytes(const Model& model) {
  const ModelConfig& c = model.config();
  double bytes = double(model.weights().bytes());
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerSpec& spec = c.layers[size_t(l)];
    if (spec.num_experts == 0) continue;
    double experts = 0;
    const LayerWeights& w = model.weights().layers[size_t(l)];
    for (const auto* stack : {&w.expert_gate_up, &w.expert_down})
      for (const WeightMatrix& m : *stack) experts += double(m.bytes());
    bytes -= experts * (1.0 - double(spec.top_k_experts) / spec.num_experts);
  }
  if (c.per_layer_dim > 0)
    bytes += double(c.num_layers) * c.per_layer_dim * double(dtype_size(model.weights().per_layer_table.dtype()));
  return bytes;
}

// A decode step of `batch` sequences, each at `context` positions of
// synthetic past.
FloorStep decode_against_floor(const Model& model, int context, int batch = 1, DType kv_dtype = SessionOptions{}.kv_dtype) {
  SessionOptions o;
  o.capacity = context + 16;
  o.kv_dtype = kv_dtype;
  Session s(model, batch, o);
  for (int q = 0; q < batch; ++q) fill_synthetic(s, q, context);
  return decode_steps_against_floor(s, decode_weight_bytes(model));
}

// KV bytes one decode step at `context` positions reads from `storage`:
// every layer that owns a cache reads its visible keys and values once.
double kv_bytes_per_step(const ModelConfig& c, int64_t context, DType storage) {
  double bytes = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.is_kv_shared(l)) continue;
    const LayerSpec& spec = c.layers[size_t(l)];
    const int64_t visible = spec.window > 0 ? std::min<int64_t>(context, spec.window) : context;
    bytes += 2.0 * double(visible) * spec.num_kv_heads * double(kv_row_bytes(storage, spec.head_dim));
  }
  return bytes;
}

// Multiply-adds x 2 of a prompt of S tokens through the decoder: every
// linear layer once per token, attention over the visible pairs of each
// layer (causal, or the sliding window), the LM head on the last row only
// (what a prompt computes unless all logits are asked for).
double prefill_flops(const Model& model, int S) {
  const ModelConfig& c = model.config();
  double f = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = model.weights().layers[size_t(l)];
    double params = 0;
    for (const WeightMatrix* m : {&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj, &w.gate_proj, &w.up_proj, &w.down_proj,
                                  &w.per_layer_input_gate, &w.per_layer_projection, &w.router})
      params += double(m->in) * double(m->out);
    const LayerSpec& spec = c.layers[size_t(l)];
    if (spec.num_experts > 0)  // each token through its top_k experts
      params += double(spec.top_k_experts) * 3.0 * spec.expert_intermediate_size * c.hidden_size;
    f += 2 * params * S;
    std::vector<KeyInterval> visible(static_cast<size_t>(S));
    for (int i = 0; i < S; ++i) visible[size_t(i)] = {spec.window > 0 ? std::max(0, i - spec.window + 1) : 0, i + 1};
    f += attention_flops(visible, c.num_heads, spec.head_dim);
  }
  const WeightMatrix& proj = model.weights().per_layer_model_projection;
  f += 2 * double(proj.in) * double(proj.out) * S;
  const WeightMatrix& head = model.weights().output_matrix();
  return f + 2 * double(head.in) * double(head.out);
}

// A whole model: a prompt of prompt_len text tokens in one call (prefill
// tokens/s and its FLOP rate against the GEMM peak probed just before), then
// decode steps against the weight-bandwidth floor; peak RSS of the row.
json whole_model(const std::string& dir, const std::string& label, int prompt_len) {
  std::printf("loading %s ...\n", label.c_str());
  std::fflush(stdout);
  reset_peak_rss();
  const Model model = Model::load(dir);
  SessionOptions o;
  o.capacity = prompt_len + 64;
  o.chunk = std::max(256, prompt_len);
  Session session(model, 1, o);
  const PromptBatch p = synthetic_prompt(model.config(), prompt_len, false);
  const double peak = probe_gemm_peak_gflops(3);
  const double t0 = now_s();
  session.append(p);
  const double prefill_s = now_s() - t0;
  const double flops = prefill_flops(model, prompt_len);
  const double weight_bytes = decode_weight_bytes(model);
  const FloorStep d = decode_steps_against_floor(session, weight_bytes);
  const double decode_s = d.step_s, floor_s = d.floor_s;
  const double gflops = flops / prefill_s / 1e9, rss = d.peak_rss_mib;
  std::printf("%-34s prefill %7.1f tokens/s, %6.1f GFLOP/s (%3.0f%% of GEMM peak %.0f); decode %6.2f tokens/s (floor %6.2f: %.0f%%); "
              "weights %.2f GB; peak RSS %.0f MiB\n",
              label.c_str(), prompt_len / prefill_s, gflops, 100 * gflops / peak, peak, 1 / decode_s, 1 / floor_s,
              100 * d.fraction, weight_bytes / 1e9, rss);
  json row{{"model", label}, {"prompt_tokens", prompt_len}, {"prefill_tokens_per_s", prompt_len / prefill_s},
           {"prefill_gflops", gflops}, {"gemm_peak_gflops", peak}, {"prefill_fraction_of_peak", gflops / peak},
           {"decode_tokens_per_s", 1 / decode_s}, {"weight_bytes", weight_bytes}, {"floor_tokens_per_s", 1 / floor_s},
           {"fraction_of_floor", d.fraction}, {"bandwidth_gbs", d.bandwidth_gbs}, {"peak_rss_mib", rss}};
  // A batched decode (the server's step for several sequences): every
  // weight byte is still read once a step, so the floor is the weights plus
  // each sequence's KV at the probed bandwidth.
  for (int batch : {4, 8}) {
    constexpr int kContext = 512;
    reset_peak_rss();
    const FloorStep f = decode_against_floor(model, kContext, batch);
    const double kv = batch * kv_bytes_per_step(model.config(), kContext, SessionOptions{}.kv_dtype);
    const double fraction = f.fraction * (weight_bytes + kv) / weight_bytes;
    std::printf("%-34s decode of %d sequences at %d: %6.2f tokens/s in all (%.0f%% of the floor of weights + KV); peak RSS %.0f MiB\n",
                label.c_str(), batch, kContext, batch / f.step_s, 100 * fraction, f.peak_rss_mib);
    row["batch_" + std::to_string(batch)] = {{"decode_tokens_per_s", batch / f.step_s}, {"step_ms", f.step_s * 1e3},
                                             {"kv_bytes_per_step", kv}, {"fraction_of_floor", fraction},
                                             {"bandwidth_gbs", f.bandwidth_gbs}, {"peak_rss_mib", f.peak_rss_mib}};
  }
  // Decode at a long synthetic past: the floor is the weights plus the KV the
  // step reads (decode_against_floor's session keeps the default KV storage),
  // both once at the probed bandwidth.
  for (int context : {4096, 16384}) {
    reset_peak_rss();
    const FloorStep f = decode_against_floor(model, context);
    const double kv = kv_bytes_per_step(model.config(), context, SessionOptions{}.kv_dtype);
    // Each pair's floor scales by the same bytes, so the fraction does too.
    const double floor_kv = (weight_bytes + kv) / (f.bandwidth_gbs * 1e9), rss_ctx = f.peak_rss_mib;
    const double fraction_kv = f.fraction * (weight_bytes + kv) / weight_bytes;
    std::printf("%-34s decode at %2dK %6.2f tokens/s (floor of weights + %.0f MiB KV %6.2f: %.0f%%; weights alone %.0f%%); peak RSS %.0f MiB\n",
                label.c_str(), context / 1024, 1 / f.step_s, kv / (1 << 20), 1 / floor_kv, 100 * fraction_kv, 100 * f.fraction, rss_ctx);
    row["at_" + std::to_string(context / 1024) + "k"] = {{"decode_tokens_per_s", 1 / f.step_s}, {"kv_bytes_per_step", kv},
                                                          {"floor_tokens_per_s", 1 / floor_kv}, {"fraction_of_floor", fraction_kv},
                                                          {"fraction_of_weight_floor", f.fraction},
                                                          {"bandwidth_gbs", f.bandwidth_gbs}, {"peak_rss_mib", rss_ctx}};
  }
  return row;
}

// --weights q8 / q4 (int8 activations in decode), their -f32act forms and
// q4 with a 4-bit embedding too ("q4-pure", the choice q4 does not make:
// docs/quantization.md) against the checkpoint's bf16 on one model: the logits' relative RMS error, mean KL
// divergence and top-1 agreement, teacher-forced over a prompt of
// `positions` tokens in chunks of 8 (the decode kernels) (random weights: a numeric check of the
// format, not a quality claim); and a decode step at a 4K-token context
// (synthetic past), each against its own weight-bandwidth floor.
json quantized_weights(const std::string& dir, const std::string& label, int positions) {
  std::printf("loading %s (bf16, q8, q4) ...\n", label.c_str());
  std::fflush(stdout);
  json out = {{"model", label}, {"positions", positions}};
  const PromptBatch p = [&] {
    const Model m = Model::load(dir);
    return synthetic_prompt(m.config(), positions, false);
  }();
  std::vector<float> base;
  static const char* const kFormats[] = {"bf16", "q8", "q8-f32act", "q4", "q4-f32act", "q4-pure"};
  for (const char* format : kFormats) {
    reset_peak_rss();
    const std::string name = format;
    WeightLoading loading = weight_loading_named(name == "bf16" ? "" : name == "q4-pure" ? "q4" : name);
    if (name == "q4-pure") loading.embedding_format = WeightFormat::Q4_0;
    const Model model = Model::load(dir, {}, loading);
    const int V = model.config().vocab_size;
    std::vector<float> logits;
    {
      // Chunks of 8 rows take the decode kernels (fewer than kGemmRows), so
      // the comparison sees what a decode step computes.
      SessionOptions o;
      o.capacity = positions + 8;
      o.chunk = 8;
      Session s(model, 1, o);
      logits = s.append(p, true);
    }
    const FloorStep f = decode_against_floor(model, 4096);
    json row = {{"weight_bytes", double(model.weights().bytes())}, {"decode_tokens_per_s_at_4k", 1 / f.step_s},
                {"floor_tokens_per_s", 1 / f.floor_s}, {"fraction_of_floor", f.fraction}, {"peak_rss_mib", f.peak_rss_mib}};
    if (base.empty()) {
      base = std::move(logits);
    } else {
      double err = 0, scale = 0, kl = 0;
      int agree = 0;
      for (int r = 0; r < positions; ++r) {
        const float* a = base.data() + int64_t(r) * V;
        const float* b = logits.data() + int64_t(r) * V;
        const double ma = *std::max_element(a, a + V), mb = *std::max_element(b, b + V);
        double za = 0, zb = 0;
        for (int v = 0; v < V; ++v) za += std::exp(a[v] - ma), zb += std::exp(b[v] - mb);
        for (int v = 0; v < V; ++v) {
          err += double(a[v] - b[v]) * (a[v] - b[v]), scale += double(a[v]) * a[v];
          const double pa = std::exp(a[v] - ma) / za;
          kl += pa * ((a[v] - ma - std::log(za)) - (b[v] - mb - std::log(zb)));
        }
        agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      }
      row["logits_relative_rms_error"] = std::sqrt(err / scale);
      row["mean_kl_divergence"] = kl / positions;
      row["top1_agreement"] = double(agree) / positions;
    }
    out[format] = row;
  }
  const json& b = out["bf16"];
  std::printf("%-34s bf16: decode at 4K %6.2f tokens/s (%.0f%% of floor); weights %.2f GB; peak RSS %.0f MiB\n", label.c_str(),
              b["decode_tokens_per_s_at_4k"].get<double>(), 100 * b["fraction_of_floor"].get<double>(),
              b["weight_bytes"].get<double>() / 1e9, b["peak_rss_mib"].get<double>());
  for (const char* format : kFormats) {
    if (format == std::string("bf16")) continue;
    json& q = out[format];
    q["decode_speedup_at_4k"] = q["decode_tokens_per_s_at_4k"].get<double>() / b["decode_tokens_per_s_at_4k"].get<double>();
    std::printf("%-34s %s: decode at 4K %6.2f tokens/s (%.0f%% of floor), %.2fx bf16; weights %.2f GB; peak RSS %.0f MiB; "
                "logits vs bf16: relative RMS %.4f, mean KL %.2e, top-1 %.3f\n",
                "", format, q["decode_tokens_per_s_at_4k"].get<double>(), 100 * q["fraction_of_floor"].get<double>(),
                q["decode_speedup_at_4k"].get<double>(), q["weight_bytes"].get<double>() / 1e9, q["peak_rss_mib"].get<double>(),
                q["logits_relative_rms_error"].get<double>(), q["mean_kl_divergence"].get<double>(), q["top1_agreement"].get<double>());
  }
  out["decode_speedup_at_4k"] = out["q8"]["decode_speedup_at_4k"];
  return out;
}

// Teacher-forced logits of `b` against `a` ([positions][V] each): relative
// RMS error, mean KL(a || b) and how often the top tokens agree.
json logits_difference(const std::vector<float>& a, const std::vector<float>& b, int positions, int V) {
  double err = 0, scale = 0, kl = 0;
  int agree = 0;
  for (int r = 0; r < positions; ++r) {
    const float* pa = a.data() + int64_t(r) * V;
    const float* pb = b.data() + int64_t(r) * V;
    const double ma = *std::max_element(pa, pa + V), mb = *std::max_element(pb, pb + V);
    double za = 0, zb = 0;
    for (int v = 0; v < V; ++v) za += std::exp(pa[v] - ma), zb += std::exp(pb[v] - mb);
    for (int v = 0; v < V; ++v) {
      err += double(pa[v] - pb[v]) * (pa[v] - pb[v]), scale += double(pa[v]) * pa[v];
      kl += std::exp(pa[v] - ma) / za * ((pa[v] - ma - std::log(za)) - (pb[v] - mb - std::log(zb)));
    }
    agree += std::max_element(pa, pa + V) - pa == std::max_element(pb, pb + V) - pb;
  }
  return {{"logits_relative_rms_error", std::sqrt(err / scale)}, {"mean_kl_divergence", kl / positions},
          {"top1_agreement", double(agree) / positions}};
}

// Prefill on bf16 weights with bf16 products (AVX512_BF16, kernels/gemm_bf16.h)
// against the exact path (the weights expanded to f32 for BLAS), toggled by
// set_exact_gemm and alternated `rounds` times in one run: a prompt of
// prompt_len tokens in one chunk, tokens/s of each and the ratio of the
// medians, with each path's peak RSS. Then the logits of `positions`
// teacher-forced positions (chunks of 64: the GEMM path) against the exact
// path's, the deviation the bf16 products cost.
json bf16_prefill(const std::string& dir, const std::string& weights, const std::string& label, int prompt_len, int positions, int rounds) {
  if (!bf16_gemm_supported()) {
    std::printf("%s: no AVX512_BF16 on this CPU (or SPLITDEC_SIMD chose another table): skipped\n", label.c_str());
    return {{"model", label}, {"skipped", true}};
  }
  std::printf("loading %s ...\n", label.c_str());
  std::fflush(stdout);
  const bool saved = exact_gemm();
  const Model model = Model::load(dir, {}, weight_loading_named(weights));
  const PromptBatch p = synthetic_prompt(model.config(), prompt_len, false);
  std::vector<double> seconds[2];  // [0] exact, [1] bf16 products
  double rss[2] = {0, 0};
  for (int i = 0; i < 2 * rounds; ++i) {
    const int fast = i % 2;
    set_exact_gemm(!fast);
    reset_peak_rss();
    SessionOptions o;
    o.capacity = prompt_len + 8;
    o.chunk = prompt_len;
    Session session(model, 1, o);
    const double t0 = now_s();
    session.append(p);
    seconds[fast].push_back(now_s() - t0);
    rss[fast] = std::max(rss[fast], peak_rss_mib());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double exact_tps = prompt_len / median(seconds[0]), fast_tps = prompt_len / median(seconds[1]);
  const int V = model.config().vocab_size;
  const PromptBatch q = synthetic_prompt(model.config(), positions, false);
  std::vector<float> logits[2];
  for (int fast = 0; fast < 2; ++fast) {
    set_exact_gemm(!fast);
    SessionOptions o;
    o.capacity = positions + 8;
    o.chunk = 64;
    Session s(model, 1, o);
    logits[fast] = s.append(q, true);
  }
  set_exact_gemm(saved);
  json out = logits_difference(logits[0], logits[1], positions, V);
  out.update({{"model", label}, {"prompt_tokens", prompt_len}, {"rounds", rounds}, {"exact_tokens_per_s", exact_tps},
              {"bf16_products_tokens_per_s", fast_tps}, {"speedup", fast_tps / exact_tps}, {"exact_peak_rss_mib", rss[0]},
              {"bf16_products_peak_rss_mib", rss[1]}, {"positions", positions}});
  std::printf("%-34s prefill %d: exact %6.1f tokens/s, bf16 products %6.1f tokens/s: %.2fx (medians of %d alternated rounds); "
              "peak RSS %.0f / %.0f MiB\n",
              label.c_str(), prompt_len, exact_tps, fast_tps, fast_tps / exact_tps, rounds, rss[0], rss[1]);
  std::printf("%-34s logits vs exact over %d positions: relative RMS %.2e, mean KL %.2e, top-1 %.3f\n", "", positions,
              out["logits_relative_rms_error"].get<double>(), out["mean_kl_divergence"].get<double>(), out["top1_agreement"].get<double>());
  return out;
}

// Decode on a given folder (the full gemma4-12b quantized, say): a step at a
// 1K and a 4K-token context (synthetic past) against the weight-bandwidth
// floor, then 1-16 lockstep sequences, with the load's peak RSS.
json folder_decode(const std::string& dir, const std::string& weights, KvStorage kv_storage) {
  const DType kv_dtype = kv_storage_dtype(kv_storage);
  std::printf("loading %s%s, KV cache %s ...\n", dir.c_str(), weights.empty() ? "" : (" (--weights " + weights + ")").c_str(),
              kv_storage_name(kv_storage));
  std::fflush(stdout);
  reset_peak_rss();
  const Model model = Model::load(dir, {}, weight_loading_named(weights));
  json out = {{"model", dir}, {"weights", weights.empty() ? "as stored" : weights}, {"kv_dtype", kv_storage_name(kv_storage)},
              {"weight_bytes", double(model.weights().bytes())}, {"decode_weight_bytes", decode_weight_bytes(model)}};
  double rss = peak_rss_mib();  // the load's
  {
    // A 512-token text prompt in one call, against the GEMM peak probed just before.
    constexpr int kPrompt = 512;
    SessionOptions o;
    o.capacity = kPrompt + 16;
    o.chunk = kPrompt;
    Session session(model, 1, o);
    const PromptBatch p = synthetic_prompt(model.config(), kPrompt, false);
    const double peak = probe_gemm_peak_gflops(3);
    const double t0 = now_s();
    session.append(p);
    const double prefill_s = now_s() - t0, gflops = prefill_flops(model, kPrompt) / prefill_s / 1e9;
    out["prefill"] = {{"prompt_tokens", kPrompt}, {"tokens_per_s", kPrompt / prefill_s}, {"gflops", gflops},
                      {"gemm_peak_gflops", peak}, {"fraction_of_peak", gflops / peak}};
    std::printf("%-40s prefill of %d: %7.1f tokens/s, %6.1f GFLOP/s (%.0f%% of the GEMM peak %.0f)\n", "", kPrompt,
                kPrompt / prefill_s, gflops, 100 * gflops / peak, peak);
    rss = std::max(rss, peak_rss_mib());
  }
  for (int context : {1024, 4096}) {
    const FloorStep f = decode_against_floor(model, context, 1, kv_dtype);
    const std::string key = "at_" + std::to_string(context / 1024) + "k";
    // The step also reads the KV cache (f32 unless --kv-dtype): the floor of all the
    // bytes it reads, beside the weights-only one.
    const double kv = kv_bytes_per_step(model.config(), context, kv_dtype);
    const double with_kv = f.fraction * (1.0 + kv / decode_weight_bytes(model));
    out[key] = {{"decode_tokens_per_s", 1 / f.step_s}, {"floor_tokens_per_s", 1 / f.floor_s}, {"fraction_of_floor", f.fraction},
                {"bandwidth_gbs", f.bandwidth_gbs}, {"kv_bytes_per_step", kv}, {"fraction_of_floor_with_kv", with_kv}};
    std::printf("%-40s decode at %dK: %6.2f tokens/s (%.0f%% of the %.2f tokens/s floor at %.1f GB/s; %.0f%% with the %.0f MB of KV read)\n",
                "", context / 1024, 1 / f.step_s, 100 * f.fraction, 1 / f.floor_s, f.bandwidth_gbs, 100 * with_kv, kv / 1e6);
    rss = std::max(rss, f.peak_rss_mib);
  }
  // Lockstep sequences at 512 positions each (the server's batched step,
  // without HTTP): aggregate tokens/s against one sequence's at the same
  // context, the ratio the batched goals name (8 >= 4x, 16 >= 6x).
  {
    constexpr int kContext = 512;
    double one = 0;
    json batches = json::object();
    for (int batch : {1, 4, 8, 16}) {
      const FloorStep f = decode_against_floor(model, kContext, batch, kv_dtype);
      const double tokens_per_s = batch / f.step_s;
      if (batch == 1) one = tokens_per_s;
      batches[std::to_string(batch)] = {{"decode_tokens_per_s", tokens_per_s}, {"step_ms", f.step_s * 1e3},
                                        {"times_one_sequence", tokens_per_s / one}, {"peak_rss_mib", f.peak_rss_mib}};
      std::printf("%-40s %2d sequences at %d: %7.2f tokens/s in all, %.2fx one sequence (step %.1f ms)\n", "", batch,
                  kContext, tokens_per_s, tokens_per_s / one, f.step_s * 1e3);
      rss = std::max(rss, f.peak_rss_mib);
    }
    out["sequences_at_512"] = batches;
  }
  out["fraction_of_floor"] = out["at_4k"]["fraction_of_floor"];
  out["peak_rss_mib"] = rss;
  std::printf("%-40s weights %.2f GB resident, %.2f GB read per decoded token; peak RSS %.0f MiB\n", "",
              out["weight_bytes"].get<double>() / 1e9, out["decode_weight_bytes"].get<double>() / 1e9,
              out["peak_rss_mib"].get<double>());
  return out;
}

}  // namespace

int run_benchmarks(const BenchOptions& opt) {
  const double start = now_s();
  const std::string work = opt.work_dir.empty() ? (fs::temp_directory_path() / ("splitdec-bench-" + std::to_string(::getpid()))).string()
                                                : opt.work_dir;
  fs::create_directories(work);
  json r;
  r["quick"] = opt.quick;
  auto wanted = [&](const char* name) { return opt.only.empty() || opt.only.find(name) != std::string::npos; };
  r["machine"] = machine(opt.quick);
  if (wanted("linear")) r["linear"] = linear_layers(r["machine"], opt.quick);
  if (wanted("decode_attention")) r["decode_attention"] = decode_attention(r["machine"], opt.quick);

  // Gemma-4-12B attention shapes on a narrow residual stream, so that the
  // cost measured is the attention and KV handling the plans differ in;
  // written once for the sections that use it.
  const std::string stack_dir = work + "/attention-stack";
  auto attention_stack = [&] {
    if (!fs::exists(stack_dir + "/config.json")) {
      MakeModelOptions mo;
      mo.preset = "gemma4-12b-attention";
      mo.out_dir = stack_dir;
      mo.dtype = DType::BF16;
      mo.seed = 1;
      make_model(mo);
    }
    return Model::load(stack_dir);
  };
  std::vector<Series> plot;
  if (wanted("plan_decode")) r["plan_decode"] = plan_decode(attention_stack(), opt.quick, plot);
  if (wanted("ttft")) r["ttft"] = time_to_first_token(attention_stack(), opt.quick);
  if (wanted("prefill")) {
    r["prefill"] = prefill_attention(opt.quick);
    r["prefill_layers"] = prefill_layers(opt.quick);
  }

  if (wanted("media")) {
    r["media"] = media_frontends(probe_gemm_peak_gflops(3), opt.quick);
    r["media_ttft"] = media_time_to_first_token(work, opt.quick);
  }

  if (wanted("audio_tower")) r["audio_tower"] = audio_tower(probe_gemm_peak_gflops(3));

  json whole = json::array();
  if (wanted("whole_model")) {
    section("whole model: a 512-token prompt, then decode");
    // gemma3-1b in bf16, f16 and f32 (quick: 4 of its 26 layers).
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      MakeModelOptions o{"gemma3-1b", work + "/gemma3-1b", 1, dt, {}};
      if (opt.quick) o.layers = 4;
      make_model(o);
      const char* dtype = weight_format_name(weight_format_of(dt));
      const std::string label = std::string(opt.quick ? "gemma3-1b (4 layers) " : "gemma3-1b ") + dtype;
      whole.push_back(whole_model(o.out_dir, label, 512));
      whole.back()["dtype"] = dtype;
      fs::remove_all(o.out_dir);
    }
  }
  json quantized = json::array();
  if (wanted("quantized")) {
    section("8-bit and 4-bit weights (--weights q8, q4) against bf16");
    MakeModelOptions o{"gemma3-1b", work + "/gemma3-1b-q", 1, DType::BF16, {}};
    if (opt.quick) o.layers = 4;
    make_model(o);
    quantized.push_back(quantized_weights(o.out_dir, opt.quick ? "gemma3-1b (4 layers)" : "gemma3-1b", opt.quick ? 64 : 256));
    fs::remove_all(o.out_dir);
    if (!opt.quick) {  // the seed's shapes; 6 of 48 layers, so that bf16 fits beside the others
      MakeModelOptions g{"gemma4-12b", work + "/gemma4-12b-q", 1, DType::BF16, 6};
      make_model(g);
      quantized.push_back(quantized_weights(g.out_dir, "gemma4-12b (6 of 48 layers)", 128));
      fs::remove_all(g.out_dir);
    }
    r["quantized"] = quantized;
  }
  if (wanted("bf16_gemm")) {
    section("bf16 prefill: bf16 products (AVX512_BF16) against the exact path");
    // bf16 and f16 checkpoints as stored; Q8_0 and Q4_0 quantized from the
    // bf16 one at load (--weights q8 / q4).
    const std::string name = opt.quick ? "gemma3-1b (4 layers) " : "gemma3-1b ";
    json rows = json::array();
    for (DType dtype : {DType::BF16, DType::F16}) {
      const std::string stored = dtype == DType::BF16 ? "bf16" : "f16";
      MakeModelOptions o{"gemma3-1b", work + "/gemma3-1b-" + stored, 1, dtype, {}};
      if (opt.quick) o.layers = 4;
      make_model(o);
      rows.push_back(bf16_prefill(o.out_dir, "", name + stored, 512, 256, opt.quick ? 3 : 5));
      if (dtype == DType::BF16)
        for (const char* q : {"q8", "q4"}) rows.push_back(bf16_prefill(o.out_dir, q, name + q, 512, 256, opt.quick ? 3 : 5));
      fs::remove_all(o.out_dir);
    }
    r["bf16_gemm"] = rows;
  }
  if (wanted("structured_output")) {
    // The --model folder's tokenizer when given, else make-model's
    // 262144-piece gemma3-1b one (its pieces are synthetic past the first few thousand).
    std::string dir = opt.model_dir;
    if (dir.empty()) {
      MakeModelOptions o{"gemma3-1b", work + "/gemma3-1b-vocab", 1, DType::BF16, 1};
      make_model(o);
      dir = o.out_dir;
    }
    r["structured_output"] = structured_output(dir, opt.quick);
    if (opt.model_dir.empty()) fs::remove_all(dir);
  }
  if (!opt.model_dir.empty() && wanted("folder")) {
    section(("decode on " + opt.model_dir).c_str());
    r["folder"] = folder_decode(opt.model_dir, opt.weights, opt.kv_storage);
  }
  if (!opt.quick && wanted("whole_model")) {
    MakeModelOptions o{"gemma4-12b", work + "/gemma4-12b", 1, DType::BF16, 6};
    make_model(o);
    whole.push_back(whole_model(o.out_dir, "gemma4-12b (6 of 48 layers) bf16", 512));
    fs::remove_all(o.out_dir);
  }
  if (wanted("whole_model")) r["whole_model"] = whole;

  // The design's targets, as measured here (reported, never asserted).
  section("targets");
  json targets = json::object();
  auto report = [&](const std::string& name, double value, double goal, const char* unit) {
    targets[name] = {{"value", value}, {"goal", goal}, {"met", value >= goal}};
    std::printf("%-62s %8.2f%s (goal %.2f%s) %s\n", name.c_str(), value, unit, goal, unit, value >= goal ? "met" : "NOT met");
  };
  if (r.contains("decode_attention")) {
    double gqa_frac = 1;
    for (const auto& e : r["decode_attention"])
      if (e["context"].get<int>() >= 16384 && e["kv_dtype"] != "q8") gqa_frac = std::min(gqa_frac, e["fraction_of_floor"].get<double>());
    report("GQA decode attention (f32, bf16, f16 KV), fraction of bandwidth floor at >= 16K", gqa_frac, 0.8, "");
    // q8 KV against bf16 KV, same context and head_dim: the slowest ratio at >= 16K.
    double q8_speedup = 1e9;
    for (const auto& a : r["decode_attention"])
      for (const auto& b : r["decode_attention"])
        if (a["kv_dtype"] == "q8" && b["kv_dtype"] == "BF16" && a["context"] == b["context"] && a["head_dim"] == b["head_dim"] &&
            a["context"].get<int>() >= 16384)
          q8_speedup = std::min(q8_speedup, b["ms"].get<double>() / a["ms"].get<double>());
    if (q8_speedup < 1e9) report("q8 KV / bf16 KV decode attention speed at >= 16K", q8_speedup, 1.7, "x");
  }
  auto plan_ms = [&](const char* plan, int ctx, const char* prompt) {
    for (const auto& e : r["plan_decode"])
      if (e["plan"] == plan && e["context"] == ctx && e["prompt"] == prompt) return e["ms_per_token"].get<double>();
    return 0.0;
  };
  if (r.contains("plan_decode")) {
    const int ctx_big = opt.quick ? 4096 : 16384;
    report("single / split decode step at " + std::to_string(ctx_big / 1024) + "K",
           plan_ms("single", ctx_big, "text") / plan_ms("split", ctx_big, "text"), 3, "x");
    const int ctx_real = opt.quick ? 1024 : 4096;
    report("split decode after image / after text prompt (" + std::to_string(ctx_real / 1024) + "K), as text/image",
           plan_ms("split", ctx_real, "text") / plan_ms("split", ctx_real, "image"), 0.95, "");
  }
  if (r.contains("prefill"))
    for (const auto& e : r["prefill"]) {
      const int S = e["S"].get<int>();
      if (e["image_tokens"] != 1100) continue;
      if (S == (opt.quick ? 2048 : 8192))
        report("masked / dense-bias prefill speedup at S=" + std::to_string(S), e["speedup"].get<double>(), 1.8, "x");
      if (S >= 8192)
        report("masked prefill attention, fraction of GEMM peak at S=" + std::to_string(S), e["masked_fraction_of_peak"].get<double>(), 0.5, "");
      if (S == 32768 && !e["rowwise_ms"].is_null())
        report("masked prefill attention at S=32K, rowwise / flash", e["masked_speedup_vs_rowwise"].get<double>(), 10, "x");
    }
  if (r.contains("folder")) report("decode fraction of floor at 4K, " + opt.model_dir, r["folder"]["fraction_of_floor"], 0.8, "");
  for (const auto& e : r["whole_model"]) {
    report("decode fraction of floor, " + e["model"].get<std::string>(), e["fraction_of_floor"], 0.8, "");
    for (const char* at : {"at_4k", "at_16k"})
      if (e.contains(at))
        report(std::string("decode fraction of floor (weights + KV) ") + at + ", " + e["model"].get<std::string>(),
               e[at]["fraction_of_floor"], 0.8, "");
    if (e.contains("dtype"))
      report("whole-model prefill, fraction of GEMM peak, " + e["model"].get<std::string>(), e["prefill_fraction_of_peak"], 0.6, "");
  }
  for (const auto& e : quantized) {
    const std::string m = e["model"].get<std::string>();
    report("q8 / bf16 decode tokens/s at 4K, " + m, e["decode_speedup_at_4k"], 1.8, "x");
    report("q8 decode fraction of its floor at 4K, " + m, e["q8"]["fraction_of_floor"], 0.8, "");
    report("q4 / bf16 decode tokens/s at 4K, " + m, e["q4"]["decode_speedup_at_4k"], 3.2, "x");
    report("q4 decode fraction of its floor at 4K, " + m, e["q4"]["fraction_of_floor"], 0.8, "");
    targets["q8 logits relative RMS error, " + m] = {{"value", e["q8"]["logits_relative_rms_error"]}, {"goal", 0.01},
                                                      {"met", e["q8"]["logits_relative_rms_error"].get<double>() <= 0.01}};
    std::printf("%-62s %8.4f (goal <= 0.0100) %s\n", ("q8 logits relative RMS error, " + m).c_str(),
                e["q8"]["logits_relative_rms_error"].get<double>(),
                e["q8"]["logits_relative_rms_error"].get<double>() <= 0.01 ? "met" : "NOT met");
  }
  if (r.contains("linear"))
    for (const auto& e : r["linear"]) report(std::string("prefill GEMM fraction of peak, ") + e["dtype"].get<std::string>(), e["prefill_fraction_of_peak"], 0.6, "");
  if (r.contains("media"))
    for (const auto& e : r["media"])
      report("media encoder FLOP rate, fraction of GEMM peak, " + e["frontend"].get<std::string>() +
                 (e.contains("budget") ? " @" + std::to_string(e["budget"].get<int>()) : ""),
             e["fraction_of_peak"], 0.6, "");
  r["targets"] = targets;
  r["seconds"] = now_s() - start;
  std::printf("\nbench finished in %.0f s\n", now_s() - start);

  if (!opt.json_path.empty()) std::ofstream(opt.json_path) << r.dump(2) << "\n";
  if (!opt.plot_path.empty())
    std::ofstream(opt.plot_path) << line_chart_svg("Per-token decode cost (Gemma-4-12B attention shapes, 6 layers)", "context (tokens)",
                                                   "ms per token", plot);
  if (opt.work_dir.empty()) fs::remove_all(work);
  return 0;
}

}  // namespace splitdec::bench
