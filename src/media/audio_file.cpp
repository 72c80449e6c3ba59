#include "media/audio_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sndfile.h>

#include "core/error.h"
#include "media/audio_resample.h"

// libsndfile reads the samples, as Python's soundfile (and so librosa and
// transformers' load_audio) does: sf_readf_float with its default
// normalization, i.e. 16-bit PCM / 32768, 24-bit / 2^23, 32-bit / 2^31, float
// as stored. Channels are averaged in float, in channel order, then divided by
// their count, as numpy's mean over the channel axis does.
//
// Resampling: a rate other than 16 kHz is converted after the channels are
// averaged, as librosa.load(path, sr=16000) does (audio_resample.h: libsoxr
// at librosa's default quality). The length limit is a duration, so it is
// checked in input frames at the file's own rate.

namespace splitdec {

namespace {

constexpr sf_count_t kBlockFrames = 4096;

struct CloseSndFile {
  void operator()(SNDFILE* f) const { sf_close(f); }
};

bool is_wav_family(int major) {
  return major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX || major == SF_FORMAT_RF64;
}

// The encodings accepted: plain PCM, float and the G.711 laws; libsndfile's
// ADPCM/GSM/MPEG codecs are refused (little used for speech models' input,
// and more decoder surface for hostile files).
bool is_supported_encoding(int sub) {
  switch (sub) {
    case SF_FORMAT_PCM_S8: case SF_FORMAT_PCM_U8: case SF_FORMAT_PCM_16: case SF_FORMAT_PCM_24:
    case SF_FORMAT_PCM_32: case SF_FORMAT_FLOAT: case SF_FORMAT_DOUBLE: case SF_FORMAT_ULAW: case SF_FORMAT_ALAW:
      return true;
    default:
      return false;
  }
}

std::string format_name(int format) {
  SF_FORMAT_INFO info{};
  info.format = format;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof info) == 0 && info.name) return info.name;
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04x", unsigned(format));
  return std::string("format ") + hex;
}

std::string minutes(int64_t frames, int rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", double(frames) / rate / 60.0);
  return text;
}

}  // namespace

bool looks_like_audio(const unsigned char* data, size_t size) {
  if (size >= 4 && std::memcmp(data, "fLaC", 4) == 0) return true;
  if (size < 12 || std::memcmp(data + 8, "WAVE", 4) != 0) return false;
  return std::memcmp(data, "RIFF", 4) == 0 || std::memcmp(data, "RIFX", 4) == 0 || std::memcmp(data, "RF64", 4) == 0;
}

AudioClip read_audio_file(const std::string& path) {
  // The magic first: libsndfile would also open AIFF, AU, Ogg and headerless
  // guesses, which this reader does not promise.
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw InputError(path + ": cannot open the audio file (" + std::strerror(errno) + ")");
    unsigned char head[12] = {};
    const size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (!looks_like_audio(head, n))
      throw InputError(path + ": not a WAV or FLAC file (" + (n == 0 ? std::string("empty") : "no RIFF/RF64 WAVE or fLaC header") +
                       "); splitdec reads 16 kHz WAV or FLAC audio");
  }

  SF_INFO info{};
  std::unique_ptr<SNDFILE, CloseSndFile> file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) throw FormatError(path + ": not a readable WAV or FLAC file (libsndfile: " + sf_strerror(nullptr) + ")");
  const int major = info.format & SF_FORMAT_TYPEMASK, sub = info.format & SF_FORMAT_SUBMASK;
  if (!is_wav_family(major) && major != SF_FORMAT_FLAC)
    throw InputError(path + ": a " + format_name(major) + " file; splitdec reads WAV or FLAC audio");
  if (!is_supported_encoding(sub))
    throw InputError(path + ": " + format_name(sub) + " encoding is not supported (PCM, float, u-law or A-law WAV, or FLAC); " +
                     "convert it, e.g. `sox in.wav -e signed-integer -b 16 out.wav`");
  const int rate = info.samplerate;
  if (rate < kMinAudioInputRate || rate > kMaxAudioInputRate)
    throw InputError(path + ": the audio header gives a sample rate of " + std::to_string(rate) + " Hz; splitdec reads " +
                     std::to_string(kMinAudioInputRate) + " to " + std::to_string(kMaxAudioInputRate) +
                     " Hz (resampled to 16 kHz)");
  if (info.channels < 1 || info.channels > kMaxAudioChannels)
    throw FormatError(path + ": the audio header gives " + std::to_string(info.channels) +
                      " channels; splitdec reads 1 to " + std::to_string(kMaxAudioChannels) + " (kMaxAudioChannels)");
  // libsndfile reports a FLAC whose STREAMINFO total is 0 ("unknown") as
  // SF_COUNT_MAX frames: the length is then what the reading finds, under the
  // same limit. Any other count is the header's claim, checked before allocating.
  const bool length_known = info.frames != SF_COUNT_MAX;
  if (info.frames <= 0) throw InputError(path + ": no audio samples (the audio data is empty)");
  // kMaxAudioFrames at 16 kHz: the same duration at the file's rate.
  const int64_t max_frames = kMaxAudioFrames * rate / kAudioSampleRate;
  const std::string limit = "the limit of " + std::to_string(max_frames) + " frames at " + std::to_string(rate) +
                            " Hz (kMaxAudioFrames, " + minutes(kMaxAudioFrames, kAudioSampleRate) + " minutes)";
  if (length_known && info.frames > max_frames)
    throw InputError(path + ": the audio header gives " + std::to_string(info.frames) + " frames (" +
                     minutes(info.frames, rate) + " minutes), more than " + limit);

  AudioClip clip;
  std::optional<AudioResampler> resampler;
  if (rate != kAudioSampleRate) resampler.emplace(rate, kAudioSampleRate);
  if (length_known) clip.samples.reserve(size_t(AudioResampler::output_length(info.frames, rate, kAudioSampleRate)));
  const size_t channels = size_t(info.channels);
  std::vector<float> block(size_t(kBlockFrames) * channels);
  std::vector<float> mono(static_cast<size_t>(kBlockFrames));
  int64_t frames = 0;
  for (;;) {
    const sf_count_t got = sf_readf_float(file.get(), block.data(), kBlockFrames);
    if (got <= 0) break;
    if (frames + got > max_frames) throw InputError(path + ": the audio runs past " + limit);
    for (sf_count_t i = 0; i < got; ++i) {
      const float* frame = block.data() + size_t(i) * channels;
      float sum = frame[0];
      for (size_t c = 1; c < channels; ++c) sum += frame[c];
      // Float files can hold NaN or infinity, which no encoder should be fed.
      if (!std::isfinite(sum))
        throw InputError(path + ": audio sample " + std::to_string(frames + i) + " is not a finite number");
      mono[size_t(i)] = channels == 1 ? sum : sum / float(channels);
    }
    if (resampler) resampler->push(mono.data(), size_t(got), clip.samples);
    else clip.samples.insert(clip.samples.end(), mono.begin(), mono.begin() + got);
    frames += got;
  }
  if (sf_error(file.get()) != SF_ERR_NO_ERROR)
    throw FormatError(path + ": the audio data is corrupt (libsndfile: " + sf_strerror(file.get()) + ")");
  if (frames == 0) throw InputError(path + ": no audio samples (the audio data is empty)");
  if (resampler) resampler->finish(clip.samples);
  return clip;
}

}  // namespace splitdec
