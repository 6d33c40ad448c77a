#!/usr/bin/env bash
# Run HERE (the development machine, Debian 12), not on the GPU machine: downloads
# the .deb files the Qt-free build needs and the GPU machine lacks into .gpu-deps/
# (git-ignored through .gitignore). The device call carries that folder and
# tools/gpu/run.sh unpacks it with dpkg -x into a private prefix (never into /).
#   SQLite:        libsqlite3-0, libsqlite3-dev    (app/core's database)
#   SentencePiece: libsentencepiece0, libsentencepiece-dev   (inference/tokenizer)
#   PCRE2:         libpcre2-8-0, libpcre2-dev      (inference/tokenizer's pre-split regex)
#   GoogleTest:    libgtest-dev                    (the engine and GPU tests; static libraries)
# Nothing else: the -dev packages' other dependencies (libc6-dev, the 16/32-bit
# PCRE2 libraries) are either on the GPU machine already or never linked.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1

dir=.gpu-deps
git check-ignore -q "$dir/x.deb" || { echo "fetch-deps: $dir/ is not git-ignored: add /$dir/ to .gitignore" >&2; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
(cd "$dir" && apt-get download libsqlite3-0 libsqlite3-dev libsentencepiece0 libsentencepiece-dev \
  libpcre2-8-0 libpcre2-dev libgtest-dev)
ls -l "$dir"
echo "carried size: $(du -sh "$dir" | cut -f1) in $dir (carry: [\"$dir\"])"
