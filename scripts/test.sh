#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite through ctest; then, unless
# SPLITDEC_SKIP_SANITIZE=1, the same suite under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# setup.sh installed ONNX Runtime: the export tests must run, not skip.
export SPLITDEC_REQUIRE_ONNXRUNTIME=1
scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
if [ "${SPLITDEC_SKIP_SANITIZE:-0}" != 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DSPLITDEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$(nproc)")
fi
