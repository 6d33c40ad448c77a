#!/bin/bash
# Alternating end-to-end runs, as used for e2e-*.log: per round llama.cpp, then each
# moechat binary given; prefill 512 tokens, decode 64, 2 threads.
#   e2e.sh FILE ROUNDS OUT LLAMA_BENCH NAME=MOECHAT_CLI [NAME=MOECHAT_CLI ...]
# OUT gets "round i NAME prefill_tok_s decode_tok_s load_average" per run.
F=$1; ROUNDS=$2; OUT=$3; LLAMA=$4; shift 4
: > "$OUT"
for i in $(seq 1 "$ROUNDS"); do
  r=$("$LLAMA" -m "$F" -t 2 -p 512 -n 64 -r 1 -o json 2>/dev/null |
      python3 -c "import json,sys; print(' '.join('%.2f' % x['avg_ts'] for x in json.load(sys.stdin)))")
  echo "round $i llama $r $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT"
  for nb in "$@"; do
    r=$("${nb#*=}" bench "$F" --policies resident --prompt-tokens 512 --decode-tokens 64 --threads 2 2>&1 |
        awk '$1 == "resident" {print $3, $4}')
    echo "round $i ${nb%%=*} $r $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT"
  done
done
