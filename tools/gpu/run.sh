#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2155  # stages are called indirectly; local x=$(date) is fine here
# The GPU machine's runbook (docs/CUDA.md "Running the tests on a GPU"). Run from the
# repository root ON the device, with .gpu-deps/ carried (tools/gpu/fetch-deps.sh,
# run on the development machine, fills it):
#
#   tools/gpu/run.sh [build] [test] [sanitize] [bench] [speed] [peer] [ab]   (default: build test)
#
#   build     unpack .gpu-deps/*.deb (dpkg -x, into build-gpu/deps, never into /),
#             configure build-gpu/ (-DMOECHAT_GUI=OFF, sm_90, RelWithDebInfo, the GPU
#             tests on libmoechat_cuda.so: -DMOECHAT_CUDA_STANDIN=OFF) against
#             that SQLite/SentencePiece/PCRE2, build with every core
#   test      ctest -R '^cuda_' -V (output saved), then the rest of the Qt-free suite
#   sanitize  compute-sanitizer memcheck (+ racecheck) on moechat-cli generate --demo
#             --backend cuda, policies resident and proactive --cache-share 0.25
#   bench     bench --demo --backend cuda, then bench --preset DS-1 --quant f16
#             --backend cuda --cache-share 0.5 (a 32 GB model generated into a cache
#             folder on the disk with the most room)
#   speed     the card's measured memory bandwidth; generate --policy resident on the
#             GPU and on every CPU core, on an OLMoE-shaped Q4_K model (generated)
#             and DS-1 F16 (the bench stage's), with `info` for the bytes per token
#   peer      llama.cpp beside moechat on the same OLMoE-shaped Q4_K file, alternating
#             run by run: llama-bench -ngl 99 -fa 1 (pp512 / tg128) against moechat's
#             resident bench row (512-token prompt, 128 decoded); llama-bench
#             --n-cpu-moe 8 (half the layers' experts on the CPU) against moechat at
#             half the experts in VRAM (reactive-lru, proactive, each with and without
#             --mapped-decode). Needs llama.cpp: tools/gpu/pack-peer.sh splits it in two
#             parts (the tree's 64 MiB limit); carry .peers/llama-peer.part-00 and
#             .peers/llama-peer.sha256 in one call, part-01 and the .sha256 in the next
#             (the machine still warm): every call keeps the parts it brings in
#             /tmp/moechat-peer/parts, and peer unpacks them once both are there
#   ab        this tree's libmoechat_cuda.so against one built from a copy of the tree
#             with .ab/'s kernel sources in place (tools/gpu/pack-ab.sh BASE writes
#             them; carry .ab), both under this moechat-cli (MOECHAT_CUDA_LIBRARY):
#             bench resident on the OLMoE-shaped Q4_K file, 512-token prompt and 128
#             decoded, alternating the two libraries run by run, three rounds
#
# A stage other than build builds first when build-gpu/ has no moechat-cli (a fresh
# machine). Logs and JSON go to $OUT (the device tool brings back at most 8 files:
# this writes at most 8), else build-gpu/out. Each call ends with a summary table:
# the tool returns only the last 12,000 characters. Every long command runs under
# `timeout` against one budget (MOECHAT_GPU_BUDGET_S, default 570 s, the tool's limit
# being 600 s), so the table is printed even when a stage runs out of time.
# Expected times per stage on an H100: unknown until measured (docs/CUDA.md).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
START=$(date +%s)
BUDGET=${MOECHAT_GPU_BUDGET_S:-570}
BUILD=$ROOT/build-gpu
PREFIX=$BUILD/deps
LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
CLI=$BUILD/app/moechat-cli
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(build test)
SUMMARY=()
STATUS=0

# Seconds left of the budget, at least 1 (`timeout 0` would mean no limit at all).
left() {
  local l=$((BUDGET - ($(date +%s) - START)))
  echo $((l < 1 ? 1 : l))
}
row() { SUMMARY+=("$(printf '%-22s %-8s %6ss  %s' "$1" "$2" "$3" "$4")"); }
note() { echo "== $*" | tee -a "$OUT/env.log"; }
gpu_present() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }
no_gpu_reason() {
  if ! command -v nvidia-smi >/dev/null; then echo "nvidia-smi not found"; else nvidia-smi -L 2>&1 | head -1; fi
}

# What the machine has (the compilers nvcc needs, cmake, ninja, sanitizer, the GPU).
environment() {
  : >"$OUT/env.log"
  note "date $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
  for t in gcc g++ cmake ninja nvcc compute-sanitizer nvidia-smi; do
    p=$(command -v $t || { [ -x /usr/local/cuda/bin/$t ] && echo /usr/local/cuda/bin/$t; })
    if [ -n "$p" ]; then
      note "$t: $p ($("$p" --version 2>&1 | grep -m1 -iE 'version|release|[0-9]+\.[0-9]+' | head -c 100))"
    else
      note "$t: MISSING"
    fi
  done
  if gpu_present; then
    local smi
    smi=$(nvidia-smi 2>&1)
    echo "$smi" >>"$OUT/env.log"
    echo "$smi" | head -20
  else
    note "no GPU: $(no_gpu_reason)"
  fi
  note "disk free: $(df -h --output=target,avail / /tmp "$ROOT" 2>/dev/null | tail -n +2 | sort -u | tr -s ' ' | paste -sd';')"
}
# nvcc and compute-sanitizer live in /usr/local/cuda/bin, not always on PATH.
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin

unpack_deps() {
  [ -f "$LIBDIR/libsqlite3.so" ] && return 0
  ls "$ROOT"/.gpu-deps/*.deb >/dev/null 2>&1 || {
    echo "build: no .gpu-deps/*.deb: run tools/gpu/fetch-deps.sh here and carry .gpu-deps" >&2
    return 1
  }
  mkdir -p "$PREFIX"
  for f in "$ROOT"/.gpu-deps/*.deb; do dpkg -x "$f" "$PREFIX" || return 1; done
}

# Configures source folder $1 into build folder $2 with generator $3. Every
# dependency named by path inside the prefix (pkg-config disabled): the system's
# copies, where there are any, are never picked up.
configure_gpu() {
  timeout "$(left)" cmake -S "$1" -B "$2" -G "$3" -DMOECHAT_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DMOECHAT_CUDA_STANDIN=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
    -DSQLite3_INCLUDE_DIR="$PREFIX/usr/include" -DSQLite3_LIBRARY="$LIBDIR/libsqlite3.so" \
    -DSPM_INCLUDE_DIR="$PREFIX/usr/include" -DSPM_LIBRARY="$LIBDIR/libsentencepiece.so" \
    -DPCRE2_INCLUDE_DIR="$PREFIX/usr/include" -DPCRE2_LIBRARY="$LIBDIR/libpcre2-8.so" \
    -DGTest_DIR="$LIBDIR/cmake/GTest"
}

stage_build() {
  local t0=$(date +%s) log=$OUT/build.log gen=Ninja
  command -v ninja >/dev/null || gen="Unix Makefiles"
  for t in gcc g++; do
    command -v "$t" >/dev/null || {
      row build FAIL 0 "$t missing (nvcc needs a host compiler)"
      return 1
    }
  done
  if ! unpack_deps >"$log" 2>&1; then
    row build FAIL $(($(date +%s) - t0)) "deps: $(tail -1 "$log")"
    return 1
  fi
  export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! configure_gpu "$ROOT" "$BUILD" "$gen" >>"$log" 2>&1; then
    row build FAIL $(($(date +%s) - t0)) "configure failed (build.log): $(grep -m1 -E 'Error|error' "$log")"
    return 1
  fi
  grep -E 'moechat: (CUDA|SQLite|MOECHAT_GUI)' "$log"
  if ! timeout "$(left)" cmake --build "$BUILD" -j "$(nproc)" -- -k 0 >>"$log" 2>&1; then
    grep -m5 -E 'error|FAILED' "$log"
    row build FAIL $(($(date +%s) - t0)) "build failed or timed out (build.log)"
    return 1
  fi
  local cuda=no
  grep -q 'moechat: CUDA found' "$log" && cuda=yes
  row build ok $(($(date +%s) - t0)) "CUDA $cuda; sqlite $(ldd "$CLI" | grep -o '/[^ ]*libsqlite3[^ ]*')"
}

ensure_built() {
  [ -x "$CLI" ] && { export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; return 0; }
  echo "== no build in $BUILD: building first"
  stage_build
}

# The pinned host->device bandwidth (the cuda_offload test's probe), into env.log.
pinned_bandwidth() {
  gpu_present && [ -x "$BUILD/tests/gpu/test_cuda_offload" ] || return 0
  timeout 60 "$BUILD/tests/gpu/test_cuda_offload" --gtest_filter=CudaOffload.bandwidthProbe 2>&1 | grep -E 'INFO|FAIL' | tee -a "$OUT/env.log"
}

ctest_rows() {  # "  1/3 Test #2: cuda_offload ....   Passed    0.31 sec" -> rows
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$1" | while read -r line; do
    name=$(echo "$line" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/')
    res=$(echo "$line" | sed -E 's/.*\.\.\.+ *//; s/ +[0-9.]+ sec$//; s/\*//g')
    secs=$(echo "$line" | grep -oE '[0-9.]+ sec$' | cut -d' ' -f1)
    echo "$name|$res|$secs"
  done
}

stage_test() {
  local t0=$(date +%s) rc=0
  ensure_built || return 1
  timeout "$(left)" ctest --test-dir "$BUILD" -R '^cuda_' -V >"$OUT/test-cuda.log" 2>&1 || rc=1
  timeout "$(left)" ctest --test-dir "$BUILD" -E '^cuda_' --output-on-failure >"$OUT/test.log" 2>&1 || rc=1
  grep -hE '^([0-9]+: )?(INFO|\[  FAILED  \]|\[  SKIPPED \]|.*: Failure$)' "$OUT/test-cuda.log" "$OUT/test.log" | cut -c1-200 | tail -30
  while IFS='|' read -r name res secs; do
    row "  $name" "$res" "${secs%.*}" ""
  done < <(ctest_rows "$OUT/test-cuda.log"; ctest_rows "$OUT/test.log")
  row test "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) \
    "$(grep -h 'tests passed,' "$OUT/test-cuda.log" "$OUT/test.log" | paste -sd';')"
  return "$rc"
}

need_gpu() {
  gpu_present && return 0
  row "$1" SKIP 0 "no GPU: $(no_gpu_reason)"
  return 2
}

stage_sanitize() {
  local t0=$(date +%s) rc=0 log=$OUT/sanitize.log
  need_gpu sanitize || return 2
  command -v compute-sanitizer >/dev/null || {
    row sanitize FAIL 0 "compute-sanitizer not found (looked on PATH and in /usr/local/cuda/bin)"
    return 1
  }
  ensure_built || return 1
  : >"$log"
  local -a runs=("resident|--policy resident" "proactive|--policy proactive --cache-share 0.25")
  for tool in memcheck racecheck; do
    for r in "${runs[@]}"; do
      local name=${r%%|*} opts=${r#*|} t1=$(date +%s) extra=""
      [ "$tool" = memcheck ] && extra="--leak-check full"
      local one=$OUT/.sanitize-run
      echo "=== compute-sanitizer --tool $tool $extra moechat-cli generate --demo --backend cuda $opts -n 16" >>"$log"
      # shellcheck disable=SC2086
      timeout "$(left)" compute-sanitizer --tool $tool $extra --error-exitcode 99 \
        "$CLI" generate --demo --backend cuda $opts -n 16 >"$one" 2>&1
      local code=$? errors why=""
      cat "$one" >>"$log"
      errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$one" | tail -1 | grep -oE '[0-9]+')
      local res=ok
      [ "$code" -ne 0 ] && res=FAIL && rc=1 && why="; $(grep -m1 -iE 'error' "$one" | cut -c1-120)"
      [ "$code" -eq 124 ] && res=TIMEOUT
      rm -f "$one"
      row "  $tool" "$res" $(($(date +%s) - t1)) "$name: ${errors:-?} errors (exit $code)$why"
    done
  done
  grep -E '^========= (Invalid|Race|Program hit|ERROR)' "$log" | sort | uniq -c | head -20
  row sanitize "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) "sanitize.log"
  return "$rc"
}

# The bench's JSON as a short table (the JSON itself has every figure).
bench_table() {
  python3 - "$1" 2>/dev/null <<'PY' || echo "(no table: $1 is not the bench's JSON)"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{d['model']}: {d['compute']}, {d['cache_slots']}/{d['total_experts']} slots, "
      f"link {d['link_bytes_per_second'] / 1e9:.1f} GB/s ({d['link']})")
print(f"{'policy':<22}{'ttft s':>9}{'decode tok/s':>14}{'ready %':>9}{'GB moved':>10}{'x bound':>9}")
for p in d["policies"]:
    ready = 100.0 * p["ready_hits"] / p["expert_uses"] if p["expert_uses"] else 0.0
    print(f"{p['policy']:<22}{p['ttft_s']:>9.3f}{p['decode_tok_s']:>14.2f}{ready:>9.1f}"
          f"{p['gb_moved']:>10.3f}{p['x_bound']:>9.2f}")
PY
}

# The folder for generated models: the filesystem with the most room (DS-1 F16 is
# a 32 GB file).
model_cache() {
  local dir best=0 cache=""
  for dir in "$ROOT/build-gpu" /tmp /root /var/tmp; do
    if [ ! -d "$dir" ] || [ ! -w "$dir" ]; then continue; fi
    local avail
    avail=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
    [ "${avail:-0}" -gt "$best" ] && best=$avail && cache=$dir/moechat-models
  done
  mkdir -p "$cache" && echo "$cache"
}

# The card's memory bandwidth, measured now: a large device-to-device copy through
# PyTorch (the machine's python3 has it), bytes read + written, median of 20 copies.
hbm_bandwidth() {
  python3 - 2>&1 <<'PY' || echo "hbm: no measurement (python3/torch missing)"
import torch
n = 1 << 31  # 2 GiB
a = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
times = []
for i in range(23):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize()
    if i >= 3: times.append(s.elapsed_time(e) / 1e3)
times.sort()
t = times[len(times) // 2]
print(f"hbm: device-to-device copy of {n / 2**30:.0f} GiB: {2 * n / t / 1e9:.0f} GB/s read+write "
      f"(median of {len(times)}, {t * 1e3:.2f} ms)")
PY
}

# Decode speed with every weight on the card (resident), beside the CPU on every core
# of this machine, on the DS-1 F16 model that the bench stage generated and on an
# OLMoE-shaped Q4_K model generated here; `info` gives the bytes a token reads (the
# bound: those bytes over the measured bandwidth).
stage_speed() {
  local t0=$(date +%s) rc=0 log=$OUT/bench.log  # appended to: the tool brings back 8 files
  need_gpu speed || return 2
  ensure_built || return 1
  local cache
  cache=$(model_cache)
  echo "== stage speed" >>"$log"
  hbm_bandwidth | tee -a "$log"
  local q4=$cache/OLMoE-q4_k.gguf
  if [ ! -f "$q4" ]; then
    local t1=$(date +%s)
    timeout "$(($(left) < 150 ? $(left) : 150))" "$CLI" gen-model --preset OLMoE --expert-type q4_k \
      --weight-type q4_k -o "$q4.part" >>"$log" 2>&1 && mv "$q4.part" "$q4"
    echo "== gen-model OLMoE q4_k: $(($(date +%s) - t1)) s" | tee -a "$log"
  fi
  local f b
  for f in "$q4" "$cache/DS-1-f16.gguf"; do
    [ -f "$f" ] || { echo "== $f missing" | tee -a "$log"; rc=1; continue; }
    timeout 60 "$CLI" info "$f" 2>&1 | grep -iE 'param|expert|bytes|total' | head -12 | tee -a "$log"
    for b in cuda cpu; do
      local t1=$(date +%s) one=$OUT/.speed-run
      echo "=== generate $(basename "$f") --backend $b --policy resident -n 64" >>"$log"
      timeout "$(left)" "$CLI" generate "$f" --backend "$b" --policy resident --threads "$(nproc)" \
        -p "The history of" -n 64 --temp 0 >"$one" 2>&1
      local code=$?
      cat "$one" >>"$log"
      local dec
      dec=$(grep -E '^(prefill|decode):' "$one" | sed -E 's/.*= ([0-9.]+ tok\/s).*/\1/' | paste -sd' ')
      [ "$code" -ne 0 ] && rc=1 && dec="exit $code: $(tail -1 "$one" | cut -c1-100)"
      rm -f "$one"
      row "  $(basename "$f" .gguf) $b" "$([ "$code" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t1)) \
        "prefill, decode: $dec"
    done
  done
  grep -E '^hbm:' "$log"
  row speed "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) "bench.log"
  return "$rc"
}

# The peer's parts this call brought, kept for a later call on the same machine.
PEER=/tmp/moechat-peer
stash_peer_parts() {
  ls "$ROOT"/.peers/llama-peer.part-* >/dev/null 2>&1 || return 0
  mkdir -p $PEER/parts
  cp "$ROOT"/.peers/llama-peer.part-* "$ROOT"/.peers/llama-peer.sha256 $PEER/parts/ 2>/dev/null
  note "peer: parts here $(ls $PEER/parts | grep -c part-) of $(sed -n 2p $PEER/parts/llama-peer.sha256)"
}

# llama-bench unpacked from the parts, once every part has been brought and the
# whole matches its SHA-256; else why not.
assemble_peer() {
  [ -x $PEER/llama/bin/llama-bench ] && return 0
  local manifest=$PEER/parts/llama-peer.sha256
  [ -f "$manifest" ] || { echo "no llama.cpp parts brought (tools/gpu/pack-peer.sh)"; return 1; }
  local want have
  want=$(sed -n 2p "$manifest")
  have=$(ls $PEER/parts/llama-peer.part-* | wc -l)
  [ "$have" = "$want" ] || { echo "llama.cpp: $have of $want parts here: carry the others next call"; return 1; }
  cat $PEER/parts/llama-peer.part-* >$PEER/llama.tar.xz
  [ "$(sha256sum $PEER/llama.tar.xz | awk '{print $1}')" = "$(sed -n 1p "$manifest")" ] ||
    { echo "llama.cpp: the parts do not add up to the tarball (SHA-256)"; return 1; }
  tar xf $PEER/llama.tar.xz -C $PEER && rm -f $PEER/llama.tar.xz
}

# llama.cpp beside moechat on one file, alternating the two programs, twice each.
stage_peer() {
  local t0=$(date +%s) rc=0 log=$OUT/peer.log
  need_gpu peer || return 2
  ensure_built || return 1
  local why
  if ! why=$(assemble_peer); then
    echo "peer: $why" | tee -a "$log"
    row peer FAIL $(($(date +%s) - t0)) "$why"
    return 1
  fi
  local peer=$PEER
  export LD_LIBRARY_PATH=$peer/llama/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ldconfig -p | grep -q libnccl.so.2 || export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$peer/llama/ncclstub
  local cache q4
  cache=$(model_cache)
  q4=$cache/OLMoE-q4_k.gguf
  if [ ! -f "$q4" ]; then
    timeout "$(($(left) < 150 ? $(left) : 150))" "$CLI" gen-model --preset OLMoE --expert-type q4_k \
      --weight-type q4_k -o "$q4.part" >>"$log" 2>&1 && mv "$q4.part" "$q4"
  fi
  [ -f "$q4" ] || { row peer FAIL $(($(date +%s) - t0)) "no OLMoE q4_k file"; return 1; }
  local round
  for round in 1 2; do
    echo "=== round $round: llama-bench, all on the GPU" >>"$log"
    timeout "$(left)" $peer/llama/bin/llama-bench -m "$q4" -ngl 99 -fa 1 -t "$(nproc)" -p 512 -n 128 -r 3 \
      -o json >"$OUT/.peer-llama.json" 2>>"$log" || rc=1
    cat "$OUT/.peer-llama.json" >>"$log"
    echo "=== round $round: moechat resident" >>"$log"
    timeout "$(left)" "$CLI" bench "$q4" --backend cuda --policies resident --prompt-tokens 512 \
      --decode-tokens 128 --json >>"$log" 2>&1 || rc=1
    echo "=== round $round: llama-bench --n-cpu-moe 8 (half the experts on the CPU)" >>"$log"
    timeout "$(left)" $peer/llama/bin/llama-bench -m "$q4" -ngl 99 -fa 1 -t "$(nproc)" --n-cpu-moe 8 \
      -p 512 -n 128 -r 3 -o json >>"$log" 2>&1 || rc=1
    local mapped
    for mapped in "" --mapped-decode; do
      echo "=== round $round: moechat half the experts in VRAM ${mapped}" >>"$log"
      timeout "$(left)" "$CLI" bench "$q4" --backend cuda --cache-share 0.5 --policies reactive-lru,proactive \
        --prompt-tokens 512 --decode-tokens 128 $mapped --json >>"$log" 2>&1 || rc=1
    done
  done
  rm -f "$OUT/.peer-llama.json"
  grep -E '"(avg_ts|n_prompt|n_gen)"|"(policy|decode_tok_s|prefill_tok_s|mapped_decode)"' "$log" | tr -d ' ' |
    paste -sd' ' | sed 's/"policy"/\n"policy"/g; s/"n_prompt"/\n"n_prompt"/g' | tail -24
  row peer "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) "peer.log"
  return "$rc"
}

# The OLMoE-shaped Q4_K file the speed, peer and ab stages time (generated once per machine).
olmoe_q4() {
  local q4
  q4=$(model_cache)/OLMoE-q4_k.gguf
  if [ ! -f "$q4" ]; then
    timeout "$(($(left) < 150 ? $(left) : 150))" "$CLI" gen-model --preset OLMoE --expert-type q4_k \
      --weight-type q4_k -o "$q4.part" >&2 && mv "$q4.part" "$q4"
  fi
  [ -f "$q4" ] && echo "$q4"
}

stage_ab() {
  local t0=$(date +%s) rc=0 log=$OUT/ab.log gen=Ninja
  command -v ninja >/dev/null || gen="Unix Makefiles"
  need_gpu ab || return 2
  ensure_built || return 1
  [ -f "$ROOT/.ab/base" ] || { row ab FAIL 0 "no .ab/ here: tools/gpu/pack-ab.sh BASE, then carry .ab"; return 1; }
  local base src=$BUILD-ab-src dir=$BUILD-ab
  base=$(cat "$ROOT/.ab/base")
  local lib_this=$BUILD/lib/moechat/libmoechat_cuda.so lib_base=$dir/lib/moechat/libmoechat_cuda.so
  : >"$log"
  if [ ! -f "$lib_base" ]; then
    local t1=$(date +%s)
    rm -rf "$src" && mkdir -p "$src"
    tar -C "$ROOT" --exclude=./build-gpu --exclude='./build-gpu-ab*' --exclude=./.peers --exclude=./.gpu-deps \
      --exclude=./.git -cf - . | tar -C "$src" -xf -
    cp -a "$ROOT/.ab/tree/." "$src/"
    while read -r f; do [ -n "$f" ] && rm -f "$src/$f"; done <"$ROOT/.ab/remove"
    if ! configure_gpu "$src" "$dir" "$gen" >>"$log" 2>&1 ||
      ! timeout "$(left)" cmake --build "$dir" --target moechat_cuda -j "$(nproc)" >>"$log" 2>&1; then
      grep -m5 -E 'error|FAILED' "$log"
      row ab FAIL $(($(date +%s) - t0)) "the base library ($base) did not build (ab.log)"
      return 1
    fi
    row "  ab build $base" ok $(($(date +%s) - t1)) "$lib_base"
  fi
  local q4
  q4=$(olmoe_q4 2>>"$log") || { row ab FAIL $(($(date +%s) - t0)) "no OLMoE q4_k file"; return 1; }
  local round side
  for round in 1 2 3; do
    for side in this "$base"; do
      local lib=$lib_this t1=$(date +%s) one=$OUT/.ab-run
      [ "$side" = this ] || lib=$lib_base
      echo "=== round $round: $side ($lib)" >>"$log"
      MOECHAT_CUDA_LIBRARY=$lib timeout "$(left)" "$CLI" bench "$q4" --backend cuda --policies resident \
        --prompt-tokens 512 --decode-tokens 128 --json >"$one" 2>>"$log"
      local code=$?
      cat "$one" >>"$log"
      local tps
      tps=$(grep -oE '"(prefill|decode)_tok_s": *[0-9.]+' "$one" | sed -E 's/.*: *//' | paste -sd' ')
      rm -f "$one"
      [ "$code" -ne 0 ] && rc=1 && tps="exit $code"
      row "  ab $side r$round" "$([ "$code" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t1)) \
        "prefill, decode tok/s: $tps"
    done
  done
  row ab "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) "ab.log (this tree against $base)"
  return "$rc"
}

stage_bench() {
  local t0=$(date +%s) rc=0 log=$OUT/bench.log
  need_gpu bench || return 2
  ensure_built || return 1
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9._-')
  : >"$log"
  local t1=$(date +%s)
  timeout "$(left)" "$CLI" bench --demo --backend cuda --json >"$OUT/bench-demo-cuda.json" 2>>"$log" || rc=1
  row "  demo" "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t1)) \
    "bench-demo-cuda.json$([ "$rc" = 0 ] || echo "; $(tail -1 "$log" | cut -c1-120)")"
  bench_table "$OUT/bench-demo-cuda.json"
  local cache
  cache=$(model_cache)
  echo "== bench cache folder $cache" | tee -a "$log"
  t1=$(date +%s)
  local json=$OUT/bench-ds1-f16-$gpu.json code=0
  timeout "$(left)" "$CLI" bench --preset DS-1 --quant f16 --backend cuda --cache-share 0.5 --json \
    --cache-dir "$cache" >"$json" 2>>"$log" || code=$?
  [ "$code" -ne 0 ] && rc=1
  local res=FAIL
  [ "$code" = 0 ] && res=ok
  [ "$code" = 124 ] && res=TIMEOUT
  row "  DS-1 f16" "$res" $(($(date +%s) - t1)) \
    "$(basename "$json")$([ "$code" = 0 ] || echo "; $(tail -1 "$log" | cut -c1-120)")"
  grep -E '^bench:' "$log" | tail -8
  bench_table "$json"
  row bench "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $(($(date +%s) - t0)) "bench.log"
  return "$rc"
}

environment
stash_peer_parts
for s in "${STAGES[@]}"; do
  case $s in
    build | test | sanitize | bench | speed | peer | ab)
      echo "== stage $s ($(left) s of the budget left)"
      "stage_$s"
      code=$?
      [ $code -ne 0 ] && STATUS=1
      [ "$s" = build ] && [ $code -ne 0 ] && [ ! -x "$CLI" ] && break
      ;;
    *)
      echo "unknown stage '$s' (build, test, sanitize, bench, speed, peer, ab)" >&2
      exit 2
      ;;
  esac
done
pinned_bandwidth

echo
echo "== summary ($(($(date +%s) - START)) s; logs in $OUT)"
printf '%-22s %-8s %7s  %s\n' stage result time note
printf '%s\n' "${SUMMARY[@]}"
grep -hE 'pinned H2D bandwidth|measured pinned host->device' "$OUT"/*.log 2>/dev/null | sort -u | head -3
exit $STATUS
