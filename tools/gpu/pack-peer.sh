#!/usr/bin/env bash
# Run on the development machine: splits the prebuilt llama.cpp of ../shared/peers into
# two parts under .peers/ (git-ignored), each small enough to travel to the GPU machine
# beside a checkout (the working tree, shared/ and carried paths: 64 MiB a call; the
# tarball alone is ~40 MB and the checkout ~27 MB). Carry one part per call, two calls
# in a row on the same warm machine: tools/gpu/run.sh keeps each part it finds in
# /tmp/moechat-peer/parts and unpacks llama.cpp once both are there
# (docs/CUDA.md, "Running the tests on a GPU").
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$(ls ../shared/peers/llama.cpp-*.tar.xz 2>/dev/null | head -1)
[ -n "$src" ] || { echo "no ../shared/peers/llama.cpp-*.tar.xz" >&2; exit 1; }
mkdir -p .peers
rm -f .peers/llama-peer.part-* .peers/llama-peer.sha256
size=$(stat -c %s "$src")
split -b $(((size + 1) / 2 + 1)) -d -a 2 "$src" .peers/llama-peer.part-
sha256sum "$src" | awk '{print $1}' >.peers/llama-peer.sha256
ls .peers/llama-peer.part-* | wc -l >>.peers/llama-peer.sha256
ls -l .peers
