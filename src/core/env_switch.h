// Switches read once from the environment, for measuring one path against
// another (SPLITDEC_VNNI=0, SPLITDEC_ROW_GROUPS=0, ...): on unless set to "0".
#pragma once

#include <cstdlib>
#include <cstring>

namespace splitdec {

inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace splitdec
