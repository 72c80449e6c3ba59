#include "media/audio_resample.h"

#include <soxr.h>

#include <string>

#include "core/error.h"

namespace splitdec {

struct AudioResampler::State {
  soxr_t soxr = nullptr;
  int in_rate = 0, out_rate = 0;
  int64_t pushed = 0;
  std::vector<float> block;  // output room for one push
  ~State() {
    if (soxr) soxr_delete(soxr);
  }
};

AudioResampler::AudioResampler(int in_rate, int out_rate) : state_(std::make_unique<State>()) {
  if (in_rate < kMinAudioInputRate || in_rate > kMaxAudioInputRate || out_rate <= 0)
    throw InputError("audio sampled at " + std::to_string(in_rate) + " Hz: the resampler takes " +
                     std::to_string(kMinAudioInputRate) + " to " + std::to_string(kMaxAudioInputRate) + " Hz");
  state_->in_rate = in_rate;
  state_->out_rate = out_rate;
  soxr_error_t error = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_runtime_spec_t runtime = soxr_runtime_spec(1);  // one thread: the result does not depend on the machine
  state_->soxr = soxr_create(double(in_rate), double(out_rate), 1, &error, &io, &quality, &runtime);
  if (error || !state_->soxr) throw Error(std::string("libsoxr: cannot create a resampler: ") + (error ? error : "?"));
}

AudioResampler::~AudioResampler() = default;

int64_t AudioResampler::output_length(int64_t n, int in_rate, int out_rate) {
  return (n * out_rate + in_rate - 1) / in_rate;
}

void AudioResampler::push(const float* samples, size_t n, std::vector<float>& out) {
  State& s = *state_;
  // soxr hands out what it can per call; room for all of this push's output
  // (plus the filter's latency) takes one call.
  s.block.resize(size_t(output_length(int64_t(n), s.in_rate, s.out_rate)) + 64);
  size_t used = 0, done = 0;
  while (used < n) {
    size_t in_done = 0;
    if (soxr_error_t e = soxr_process(s.soxr, samples + used, n - used, &in_done, s.block.data(), s.block.size(), &done))
      throw Error(std::string("libsoxr: ") + e);
    out.insert(out.end(), s.block.begin(), s.block.begin() + std::ptrdiff_t(done));
    used += in_done;
    if (in_done == 0 && done == 0) break;
  }
  s.pushed += int64_t(n);
}

void AudioResampler::finish(std::vector<float>& out) {
  State& s = *state_;
  s.block.resize(4096);
  for (;;) {
    size_t done = 0;
    if (soxr_error_t e = soxr_process(s.soxr, nullptr, 0, nullptr, s.block.data(), s.block.size(), &done))
      throw Error(std::string("libsoxr: ") + e);
    if (done == 0) break;
    out.insert(out.end(), s.block.begin(), s.block.begin() + std::ptrdiff_t(done));
  }
  out.resize(size_t(output_length(s.pushed, s.in_rate, s.out_rate)), 0.f);
}

}  // namespace splitdec
