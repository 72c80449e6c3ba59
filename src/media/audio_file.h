// WAV and FLAC files to 16 kHz mono float samples (libsndfile). 16-bit PCM
// reads as sample / 32768, as the usual Python audio readers do; several
// channels are averaged. Other sample rates (1 kHz to 768 kHz) are then
// resampled to 16 kHz as librosa.load(sr=16000) does (audio_resample.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace splitdec {

constexpr int kAudioSampleRate = 16000;
// Longer clips are refused before their samples are allocated (a hostile
// header can claim billions of frames): 30 minutes at 16 kHz, 110 MiB of floats.
constexpr int64_t kMaxAudioFrames = int64_t(30) * 60 * kAudioSampleRate;
// Channels are averaged; a read block holds 4096 frames of all of them. WAV
// allows 65535 (libsndfile 1024); real speech files have 1 or 2, surround 8.
constexpr int kMaxAudioChannels = 64;

struct AudioClip {
  int sample_rate = kAudioSampleRate;
  std::vector<float> samples;  // mono
};

AudioClip read_audio_file(const std::string& path);
// True when the bytes start like a WAV (RIFF/RIFX/RF64) or FLAC file.
bool looks_like_audio(const unsigned char* data, size_t size);

}  // namespace splitdec
