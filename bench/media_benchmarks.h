// `splitdec bench` rows for the media frontends: image encode time of each
// tower as a fraction of the machine's GEMM peak, and time to first token
// for "image + question" split into frontend, prefill and first step.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace splitdec::bench {

// `peak_gflops`: the machine's f32 GEMM peak measured just before.
nlohmann::json media_frontends(double peak_gflops, bool quick);
// Gemma-4 E2B/E4B's conformer audio tower at its real shape (12 x 1024,
// random bf16 weights) on a 10 s clip: log-mel, tower and embed_audio.
nlohmann::json audio_tower(double peak_gflops);
// Makes the gemma3-12b and gemma4-12b presets (a few decoder layers, the
// real-size frontends) under `work` and removes them after.
nlohmann::json media_time_to_first_token(const std::string& work, bool quick);

}  // namespace splitdec::bench
