#include "media/audio_log_mel.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>

#include "core/error.h"
#include "media/tower_ops.h"

namespace splitdec {

namespace {

void check_shape(const LogMelShape& s) {
  if (s.frame_length <= 0 || s.hop <= 0 || s.bins <= 0 || s.fft < s.frame_length || (s.fft & (s.fft - 1)) != 0)
    throw ConfigError("log-mel features: frame " + std::to_string(s.frame_length) + ", hop " + std::to_string(s.hop) +
                      ", FFT " + std::to_string(s.fft) + " (a power of two at least the frame) and " +
                      std::to_string(s.bins) + " bins are not a usable shape");
}

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// In-place radix-2 FFT of n = 2^k points; `twiddle[j]` = exp(-2 pi i j / n), j < n / 2.
void fft(std::complex<double>* x, int n, const std::vector<std::complex<double>>& twiddle) {
  for (int i = 1, j = 0; i < n; ++i) {
    int bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(x[i], x[j]);
  }
  for (int len = 2; len <= n; len <<= 1) {
    const int step = n / len, half = len / 2;
    for (int i = 0; i < n; i += len)
      for (int k = 0; k < half; ++k) {
        const std::complex<double> t = x[i + k + half] * twiddle[size_t(k * step)];
        x[i + k + half] = x[i + k] - t;
        x[i + k] += t;
      }
  }
}

}  // namespace

int64_t log_mel_frames(int64_t samples, const LogMelShape& s) {
  // HF: a frame of the padded clip spans frame_length + 1 samples (the last
  // one only decides validity); frame i is valid when padded sample
  // i * hop + frame_length, i.e. clip sample i * hop + frame_length / 2, is real.
  const int64_t first_end = s.frame_length - s.frame_length / 2 + 1;  // samples a first valid frame needs
  return samples < first_end ? 0 : (samples - first_end) / s.hop + 1;
}

std::vector<double> htk_mel_filters(const LogMelShape& s) {
  check_shape(s);
  const int freqs = s.fft / 2 + 1, bins = s.bins;
  // Band edges evenly spaced in HTK mel; FFT bin frequencies linspace(0, sr // 2, freqs).
  std::vector<double> edges(size_t(bins) + 2);
  const double lo = hz_to_mel(s.min_hz), hi = hz_to_mel(s.max_hz);
  for (int i = 0; i < bins + 2; ++i) edges[size_t(i)] = mel_to_hz(lo + (hi - lo) * i / double(bins + 1));
  std::vector<double> f(size_t(freqs) * bins, 0.0);
  const double nyquist = double(s.sample_rate / 2);
  for (int k = 0; k < freqs; ++k) {
    const double hz = nyquist * k / double(freqs - 1);
    for (int j = 0; j < bins; ++j) {
      const double down = (hz - edges[size_t(j)]) / (edges[size_t(j) + 1] - edges[size_t(j)]);
      const double up = (edges[size_t(j) + 2] - hz) / (edges[size_t(j) + 2] - edges[size_t(j) + 1]);
      f[size_t(k) * bins + j] = std::max(0.0, std::min(down, up));
    }
  }
  return f;
}

std::vector<float> log_mel_features(const std::vector<float>& samples, const LogMelShape& s) {
  check_shape(s);
  const int64_t frames = log_mel_frames(int64_t(samples.size()), s);
  const int n = s.fft, freqs = n / 2 + 1, bins = s.bins, len = s.frame_length;
  const int64_t pad_left = len / 2;

  // HF keeps the window in f32 and multiplies the (f32) frame by it before its float64 FFT.
  std::vector<float> window(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) window[size_t(i)] = float(0.5 - 0.5 * std::cos(2 * std::numbers::pi * i / len));
  std::vector<std::complex<double>> twiddle(size_t(n / 2));
  for (int j = 0; j < n / 2; ++j) twiddle[size_t(j)] = std::polar(1.0, -2 * std::numbers::pi * j / n);
  // The filter bank is sparse: each triangle covers a few FFT bins.
  const std::vector<double> filters = htk_mel_filters(s);
  std::vector<int> first(size_t(bins), freqs), last(size_t(bins), -1);
  for (int k = 0; k < freqs; ++k)
    for (int j = 0; j < bins; ++j)
      if (filters[size_t(k) * bins + j] != 0.0) first[size_t(j)] = std::min(first[size_t(j)], k), last[size_t(j)] = k;

  std::vector<float> out(size_t(frames) * bins);
  tower::for_rows(frames, int64_t(n) * 8, [&](int64_t f0, int64_t f1) {
    std::vector<std::complex<double>> x(static_cast<size_t>(n));
    std::vector<double> mag(static_cast<size_t>(freqs));
    for (int64_t f = f0; f < f1; ++f) {
      const int64_t start = f * s.hop - pad_left;
      for (int i = 0; i < n; ++i) {
        const int64_t at = start + i;
        const float v = i < len && at >= 0 ? samples[size_t(at)] * window[size_t(i)] : 0.f;
        x[size_t(i)] = {double(v), 0.0};
      }
      fft(x.data(), n, twiddle);
      for (int k = 0; k < freqs; ++k) mag[size_t(k)] = std::abs(x[size_t(k)]);
      float* row = out.data() + size_t(f) * bins;
      for (int j = 0; j < bins; ++j) {
        double mel = 0;
        for (int k = first[size_t(j)]; k <= last[size_t(j)]; ++k) mel += mag[size_t(k)] * filters[size_t(k) * bins + j];
        row[j] = float(std::log(mel + s.mel_floor));
      }
    }
  });
  return out;
}

}  // namespace splitdec
