# Sourced by the scripts that drive ONNX Runtime GenAI
# (check_onnxruntime_genai.sh, bench_onnxruntime_genai.sh):
#   genai_driver_setup ORT_GENAI_DIR BUILD_DIR WORK_PREFIX OPT
# sets genai, root, build, splitdec and work (a temporary folder removed on
# exit), checks that the GenAI folder and splitdec are there, puts GenAI (and
# ORT_LIB_DIR, which holds libonnxruntime.so if GenAI's folder does not) on
# LD_LIBRARY_PATH and builds $work/driver from scripts/onnxruntime_genai_driver.cpp.
genai_driver_setup() {
  genai=$(cd "$1" && pwd)
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  build=$(cd "${2:-$root/build}" && pwd)
  splitdec=$build/splitdec
  for f in "$genai/include/ort_genai_c.h" "$genai/lib/libonnxruntime-genai.so" "$splitdec"; do
    [[ -e $f ]] || { echo "$0: missing $f" >&2; exit 2; }
  done
  export LD_LIBRARY_PATH="$genai/lib${ORT_LIB_DIR:+:$ORT_LIB_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  work=$(mktemp -d "/tmp/$3.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  g++ -std=c++20 "$4" -Wall -Wextra "$root/scripts/onnxruntime_genai_driver.cpp" -I"$genai/include" \
    -L"$genai/lib" -lonnxruntime-genai -Wl,-rpath,"$genai/lib" -o "$work/driver"
}
