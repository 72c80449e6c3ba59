// Sample-rate conversion of mono float audio to the models' 16 kHz, as
// Hugging Face's pipelines get it: transformers' load_audio and
// librosa.load(path, sr=16000) resample with soxr at quality "soxr_hq"
// (python-soxr: soxr_quality_spec(SOXR_HQ, 0), float32 in and out) and cut or
// zero-pad the result to ceil(n * 16000 / rate) samples (librosa's
// fix_length). This is libsoxr with the same settings, streamed so that only
// the output is held. Debian's libsoxr build is not python-soxr's bundled one,
// so the samples agree to float rounding, not bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace splitdec {

// The rates accepted as input (Hz): telephone 8 kHz and below down to 1
// kHz, studio rates up to 768 kHz.
constexpr int kMinAudioInputRate = 1000, kMaxAudioInputRate = 768000;

class AudioResampler {
 public:
  // in_rate within [kMinAudioInputRate, kMaxAudioInputRate]; out_rate > 0.
  AudioResampler(int in_rate, int out_rate);
  ~AudioResampler();
  AudioResampler(const AudioResampler&) = delete;
  AudioResampler& operator=(const AudioResampler&) = delete;

  // Feeds n input samples; appends the output samples ready so far to `out`.
  void push(const float* samples, size_t n, std::vector<float>& out);
  // Flushes the filter's tail and sets `out` to exactly
  // ceil(pushed * out_rate / in_rate) samples (librosa's length).
  void finish(std::vector<float>& out);

  // librosa's output length for n input samples.
  static int64_t output_length(int64_t n, int in_rate, int out_rate);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace splitdec
