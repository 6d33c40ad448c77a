#!/usr/bin/env bash
# Installs what building and testing moechat needs on Debian 12, skipping what
# is already there. Used by the README's two commands and by CI.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  lld                     # the linker CMake picks when present (links the tests several times faster)
  qt6-base-dev qt6-base-dev-tools qt6-qpa-plugins libqt6sql6-sqlite qt6-charts-dev libgl-dev fonts-dejavu-core
  libsqlite3-dev libsentencepiece-dev sentencepiece libpcre2-dev
  clang libclang-rt-dev   # libFuzzer target (tests/fuzz)
  clang-format            # the tree's format, checked in CI
  libboost-context-dev    # fibers of the CUDA stand-in (tests/cuda_standin)
  libgtest-dev            # GoogleTest: the engine and GPU tests (tests/engine, tests/gpu)
  wamerican               # the word list the demo model's English is checked against (tests/test_demo_model.cpp)
  strace                  # counts the chat database's syncs per commit (tests/test_persist_kill.cpp)
  python3                 # counts the include arrows between the layers (tools/layers, tests/test_layering.cpp)
)
# Node runs the third-party GGUF parser of the interop test; use the one present.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The interop test's third-party GGUF reader (@huggingface/gguf, pinned in
# tools/interop/package-lock.json). Without it that test reports "skipped".
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -f "$here/tools/interop/package.json" ] && [ ! -d "$here/tools/interop/node_modules" ]; then
  (cd "$here/tools/interop" && npm ci --silent --no-audit --no-fund) ||
    echo "warning: npm ci in tools/interop failed; the GGUF interop test will be skipped"
fi
