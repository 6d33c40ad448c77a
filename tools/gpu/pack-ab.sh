#!/usr/bin/env bash
# Run on the development machine: writes .ab/ (git-ignored), the CUDA kernel sources
# of BASE (a commit) wherever they differ from this working tree, for the A/B stage of
# tools/gpu/run.sh: on the GPU machine it builds a second libmoechat_cuda.so from this
# tree with these files in place, and times both libraries under the same moechat-cli,
# alternating run by run. Only inference/cuda/ is compared: the library's interface
# (cuda_kernels.h, the backend classes) must be the same on both sides.
#
#   tools/gpu/pack-ab.sh BASE     then carry .ab with `tools/gpu/run.sh ab`
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:?usage: tools/gpu/pack-ab.sh BASE (a commit)}
git rev-parse --verify -q "$base^{commit}" >/dev/null || { echo "no commit '$base'" >&2; exit 1; }
rm -rf .ab
mkdir -p .ab/tree
: >.ab/remove
changed=$(git diff --name-only "$base" -- inference/cuda)
[ -n "$changed" ] || { echo "inference/cuda/ is the same at $base: nothing to compare" >&2; exit 1; }
for f in $changed; do
  if git cat-file -e "$base:$f" 2>/dev/null; then
    mkdir -p ".ab/tree/$(dirname "$f")"
    git show "$base:$f" >".ab/tree/$f"
  else
    echo "$f" >>.ab/remove  # new since BASE: left out of the base library
  fi
done
git rev-parse --short "$base" >.ab/base
echo "A/B against $(cat .ab/base): $(echo "$changed" | wc -l) file(s) of inference/cuda differ"
find .ab -type f | sort
