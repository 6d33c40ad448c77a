#!/bin/sh
# The commands behind this folder's JSON (dev VM, 2 vCPU shared with other builds, no GPU).
# TRACES: the held-in mmlu_* folders (mmlu_dev mmlu_pro_test mmlu_pro_validation mmlu_test
# mmlu_validation, in that order) and the held-out ones (Polyglot-or-Not_Fact-Completion
# gpqa_diamond gpqa_extended gpqa_main sorry_bench_base tulu3_persona_if) of
# AmanPriyanshu/GPT-OSS-MoE-ExpertFingerprinting, each converted to one stream with
# `routing-trace convert FOLDERS... -o OUT --experts 32`.
set -e
CLI=${CLI:-build/app/moechat-cli}
OUT=$(dirname "$0")
HELDIN=${HELDIN:-/tmp/mmlu_all.mrt}
HELDOUT=${HELDOUT:-/tmp/heldout.mrt}
# The frozen design: shared-reuse eviction (horizon 1), the history predictor's
# naive-Bayes score over the latest 3 gates with the popularity bucket, admission swept.
NEW="--stride 1 --eviction shared-reuse --horizon 1 --sources 3 --popularity --admission 2.6,3,3.5,4,4.5"
$CLI routing-trace simulate "$HELDIN" $NEW --json > "$OUT/simulate-heldin-reuse.json"
# (The held-in run above used a binary built just before commit caf6888, whose predictor had the
# popularity bucket on by default: the same computation as --popularity here.)
# Held-out, once, after the design was frozen: the same, and the earlier design
# (shared-frequency, mean transition score) at the same admissions for the frontier.
$CLI routing-trace simulate "$HELDOUT" $NEW --json > "$OUT/simulate-heldout-reuse.json"
$CLI routing-trace simulate "$HELDOUT" --stride 1 --admission 3,4.5 --json > "$OUT/simulate-heldout-frequency.json"
# Through the engine (the tiny gpt-oss-shaped model: gen-model --arch gpt-oss --layers 24
# --experts 32 --experts-used 4), paced simulated 25 GB/s link, the first 544 tokens.
$CLI bench "${MODEL:-/tmp/oss24.gguf}" --routing-trace "$HELDIN" --cache-share 0.25 --prompt-tokens 32 \
  --decode-tokens 512 --cpu-expert-ms 0.5,2 --threads 2 --policies reactive-lru,proactive --history \
  --eviction shared-frequency,shared-reuse --json > "$OUT/bench-heldin-0.25.json"
