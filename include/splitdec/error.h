// Typed errors. The library throws these for every kind of bad input; the
// command line turns them into one line on stderr and a non-zero exit.
#pragma once

#include <stdexcept>
#include <string>

namespace splitdec {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// config.json: a missing, malformed or unsupported field.
struct ConfigError : Error {
  using Error::Error;
};

// A model or data file that cannot be read or is corrupt (safetensors, .npy).
struct FormatError : Error {
  using Error::Error;
};

// Caller input that breaks a rule: token out of range, lengths that disagree.
struct InputError : Error {
  using Error::Error;
};

// Something does not fit: KV capacity, a media block larger than what is left.
struct CapacityError : Error {
  using Error::Error;
};

}  // namespace splitdec
