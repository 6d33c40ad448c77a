#!/usr/bin/env bash
# The programs and the CUDA library, from the outside (CTest runs each mode):
#
#   cuda_cli.sh absent MOECHAT_CLI [MOECHAT_GUI]
#       Neither program links libcudart or libcublas (readelf NEEDED). With
#       /usr/local hidden (an empty tmpfs mounted over it in a user and mount
#       namespace), so no CUDA runtime can be found: `info` says the CPU computes
#       and why, `generate --demo-random -n 16 --backend auto` streams 16 tokens on the
#       CPU, and `--backend cuda` fails with a clear message (exit 1, no signal).
#       Exits 77 (CTest: skipped) where user namespaces are not allowed.
#   cuda_cli.sh bench MOECHAT_CLI
#       `bench --demo-random --backend cuda --json` on the library MOECHAT_CUDA_LIBRARY
#       names (the CPU stand-in): every policy row has its device work per prefill
#       token and per decode token and the prefill's matmul bytes, resident's decode
#       is one graph launch and one wait per token (the argmax, 8 bytes read back),
#       none stalling the device but the last token's (also with the app's default
#       sampling, `--temp 0.8`), every row samples from the device's argmax, and the timings
#       are labelled as not meaningful; `bench --kernels --backend cuda` on a small
#       shape gives a row per type asked for, labelled the same way.
set -uo pipefail
mode=$1
cli=$2
gui=${3:-}
fail() {
  echo "FAIL: $*"
  exit 1
}

case $mode in
absent)
  for prog in "$cli" $gui; do
    needed=$(readelf -d "$prog" | grep NEEDED) || fail "readelf $prog"
    if grep -E -q 'libcudart|libcublas' <<<"$needed"; then fail "$prog links CUDA: $needed"; fi
    echo "ok: $(basename "$prog") links no CUDA library"
  done
  if ! unshare -rm true 2>/dev/null; then
    echo "SKIP: user and mount namespaces are not allowed here, so /usr/local cannot be hidden"
    exit 77
  fi
  # Inside: /usr/local is empty, so a libmoechat_cuda.so finds no libcudart.so.13.
  # shellcheck disable=SC2016  # expanded by the inner shell
  unshare -rm env -u MOECHAT_CUDA_LIBRARY CLI="$cli" bash -c '
    set -uo pipefail
    mount -t tmpfs none /usr/local || { echo "FAIL: mount"; exit 1; }
    info=$("$CLI" info --demo-random --backend auto) || { echo "FAIL: info exit $?"; exit 1; }
    grep "^compute:" <<<"$info"
    grep -q "^compute: *CPU (CUDA not used: " <<<"$info" || { echo "FAIL: info does not say the CPU computes"; exit 1; }
    out=$("$CLI" generate --demo-random -n 16 --backend auto 2>&1) || { echo "FAIL: generate exit $?: $out"; exit 1; }
    grep -q "16 tokens generated" <<<"$out" || { echo "FAIL: generate: $out"; exit 1; }
    echo "ok: generate --demo-random -n 16 ran on the CPU without a CUDA runtime"
    err=$("$CLI" generate --demo-random -n 4 --backend cuda 2>&1)
    rc=$?
    [ $rc -eq 1 ] || { echo "FAIL: --backend cuda exited $rc: $err"; exit 1; }
    grep -q "cuda backend unavailable: " <<<"$err" || { echo "FAIL: unclear error: $err"; exit 1; }
    echo "ok: --backend cuda: $err"
  ' || exit 1
  ;;
bench)
  [ -n "${MOECHAT_CUDA_LIBRARY:-}" ] || fail "MOECHAT_CUDA_LIBRARY is not set"
  json=$("$cli" bench --demo-random --backend cuda --json --prompt-tokens 16 --decode-tokens 6) || fail "bench exit $?"
  rows=$(grep -c '{"policy": ' <<<"$json")
  counted=$(grep -c '"device_work": {"per_prefill_token": {"kernel_launches": [0-9.]*, "host_syncs": [0-9.]*, "stalling_host_syncs": [0-9.]*, "stream_syncs": [0-9.]*, "bytes_h2d": [0-9.]*' <<<"$json")
  # device work per decode token: kernels launched one by one, or a graph launch (resident)
  decode=$(grep -c -E '"per_decode_token": \{"kernel_launches": ([1-9]|0\.000[^}]*"graph_launches": [1-9])' <<<"$json")
  echo "$json"
  [ "$rows" -ge 5 ] || fail "expected a row per policy (resident, reactive-lru, static, proactive, cpu-experts), got $rows"
  [ "$counted" -eq "$rows" ] || fail "$counted of $rows rows count device work per prefill token"
  [ "$decode" -eq "$rows" ] || fail "$decode of $rows rows count kernel or graph launches per decode token"
  grep -q '"timings_meaningful": false, "timings_note": ' <<<"$json" || fail "timings not labelled"
  prefill=$(grep -c '"matmul_prefill": {"tokens": 16, "weight_bytes": [1-9][0-9]*, "bytes_read": [1-9]' <<<"$json")
  [ "$prefill" -eq "$rows" ] || fail "$prefill of $rows rows report the prefill's matmul bytes"
  echo "ok: $rows policies with device work per prefill and decode token"
  # resident routes on the device: a decode token is one graph launch and one wait, for the logits;
  # greedy, the next step is queued before it, so of the 5 decode tokens' waits only the
  # last stalls the device (no step follows the last token).
  resident=$(grep -o '{"policy": "resident".*' <<<"$json" | grep -o '"per_decode_token": {[^}]*}' | head -1)
  grep -q '"kernel_launches": 0.000, "host_syncs": 1.000, "stalling_host_syncs": 0.200, "stream_syncs": 0.000' <<<"$resident" ||
    fail "resident decode: expected no kernel launched alone, 1 host wait (the logits) of which 0.2 stalling, 0 stream waits: $resident"
  grep -q '"graph_launches": 1.000' <<<"$resident" || fail "resident decode: expected 1 graph launch: $resident"
  # greedy: the argmax is found on the device; its 8 bytes, not the logits row, come back.
  grep -q '"bytes_d2h": 8.0,' <<<"$resident" || fail "resident decode: expected 8 bytes read back (the argmax): $resident"
  sampling=$(grep -c '"sampling": {"on_device": true, "logits_bytes_per_decode_token": 8.0}' <<<"$json")
  [ "$sampling" -eq "$rows" ] || fail "$sampling of $rows rows sample from the device's argmax"
  echo "ok: resident decode is one graph launch and one wait per token (the argmax, 8 bytes)"
  # The app's default sampling (--temp 0.8): the device draws with the host's uniforms,
  # so the next step is queued before each wait as greedy's is; the best top_k + 1 = 41
  # candidates and the drawn entry come back (336 bytes); every row the same tokens.
  sampled=$("$cli" bench --demo-random --backend cuda --json --prompt-tokens 16 --decode-tokens 6 --temp 0.8 \
    --policies resident,reactive-lru) || fail "bench --temp 0.8 exit $?"
  grep -q '"decoding": "sampled: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05' <<<"$sampled" ||
    fail "bench --temp 0.8: not the app's default chain"
  resident=$(grep -o '{"policy": "resident".*' <<<"$sampled" | grep -o '"per_decode_token": {[^}]*}' | head -1)
  grep -q '"kernel_launches": 0.000, "host_syncs": 1.000, "stalling_host_syncs": 0.200, "stream_syncs": 0.000' <<<"$resident" ||
    fail "sampled resident decode: expected 1 host wait per token of which 0.2 stalling: $resident"
  grep -q '"bytes_d2h": 336.0,.*"graph_launches": 1.000' <<<"$resident" ||
    fail "sampled resident decode: expected 336 bytes read back and 1 graph launch: $resident"
  echo "ok: sampled resident decode is one graph launch and one wait per token, not stalling"
  kern=$("$cli" bench --kernels --backend cuda --rows 64 --cols 256 --batch 3 --set-mb 1 --bw-mb 1 \
    --types Q8_0,Q4_K,MXFP4 --json) || fail "bench --kernels exit $?"
  echo "$kern"
  [ "$(grep -o '{"type": ' <<<"$kern" | wc -l)" -eq 3 ] || fail "bench --kernels: expected 3 kernel rows"
  grep -q '"timings_meaningful": false, "kernels": ' <<<"$kern" || fail "bench --kernels: timings not labelled"
  echo "ok: bench --kernels --backend cuda on the stand-in"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
