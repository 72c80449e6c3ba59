// What this machine has, for checking sizes from files and flags before
// anything that large is allocated.
#pragma once

#include <cstdint>
#include <string>

namespace splitdec {

// Physical memory in bytes (0 when the system does not say).
uint64_t physical_memory_bytes();

// "1.5 GiB" style, for error messages.
std::string format_bytes(uint64_t bytes);

}  // namespace splitdec
