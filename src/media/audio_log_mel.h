// The log-mel features Gemma-4's conformer audio tower reads, as Hugging
// Face's Gemma4AudioFeatureExtractor computes them (FRONTENDS.md section
// 2.4; feature_extraction_gemma4.py / audio_processing_gemma4.py):
// 16 kHz samples, 160 zeros prepended ("semicausal" padding), frames of
// 320 samples every 160 (20 ms / 10 ms), periodic Hann window (f32), a
// 512-point real FFT, magnitude (not power), 128 HTK-mel triangles over
// 0..8000 Hz without normalisation, log(mel + 0.001). No preemphasis,
// dither, scaling or per-bin normalisation (the class defaults).
//
// Only the frames HF marks valid are produced: a frame is valid when the
// sample just past its window is real audio, so a clip of n samples gives
// max(0, (n - 161) / 160 + 1) frames. HF's padding to a multiple of 128
// samples only adds invalid frames, which its tower masks and drops; they
// change nothing in the valid rows (conformer_audio_tower.h).
// The float64 reference is reference_log_mel() in media/reference_towers.h.
#pragma once

#include <cstdint>
#include <vector>

namespace splitdec {

struct LogMelShape {
  int sample_rate = 16000;
  int frame_length = 320;  // 20 ms
  int hop = 160;           // 10 ms
  int fft = 512;           // 2 ** ceil(log2(frame_length))
  int bins = 128;          // feature_size
  double min_hz = 0.0, max_hz = 8000.0;
  double mel_floor = 1e-3;
};

// Valid frames of a clip of `samples` samples (0 when shorter than 161).
int64_t log_mel_frames(int64_t samples, const LogMelShape& shape = {});

// [log_mel_frames(n), bins] features, row-major.
std::vector<float> log_mel_features(const std::vector<float>& samples, const LogMelShape& shape = {});

// The mel filter bank HF builds (audio_utils.mel_filter_bank with
// norm=None, mel_scale="htk"): [fft / 2 + 1, bins], frequency-major.
std::vector<double> htk_mel_filters(const LogMelShape& shape);

}  // namespace splitdec
