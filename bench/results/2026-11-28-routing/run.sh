#!/bin/sh
# The commands behind this folder's JSON (dev VM, 2 vCPU shared with other builds, no GPU).
# TRACES: the held-in mmlu_* folders converted with `routing-trace convert` (mmlu_all.mrt)
# and the held-out folders (heldout.mrt), as docs/offload.md says.
set -e
CLI=${CLI:-build/app/moechat-cli}
OUT=$(dirname "$0")
MODEL=${MODEL:-/tmp/oss24.gguf}  # gen-model --arch gpt-oss --layers 24 --experts 32 --experts-used 4
for set in heldin:/tmp/mmlu_all.mrt heldout:/tmp/heldout.mrt; do
  name=${set%%:*}; trace=${set#*:}
  # The trace-level simulation (prefetch_sim.h) over the whole stream (held-in: run with
  # --admission 4.5 only, just before the unseen-cell prior became k / experts).
  $CLI routing-trace simulate "$trace" --stride 1 --admission 0,4.5 --json > "$OUT/simulate-$name.json"
  # Through the engine: the tiny gpt-oss-shaped model, paced simulated 25 GB/s link.
  for share in 0.25 0.5 0.75; do
    $CLI bench "$MODEL" --routing-trace "$trace" --cache-share $share --prompt-tokens 32 --decode-tokens 512 \
      --cpu-expert-ms 0.5,2 --threads 2 --policies reactive-lru,static,proactive,cpu-experts --json \
      > "$OUT/bench-$name-$share.json"
  done
done
