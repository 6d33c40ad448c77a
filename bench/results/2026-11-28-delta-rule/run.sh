#!/bin/bash
F=/tmp/q36-4l.gguf
for r in 1 2 3 4; do
  /tmp/peer/llama/bin/llama-bench -m $F -t 2 -p 64 -n 32 -r 1 -o json 2>/dev/null | python3 -c "
import json,sys; d=json.load(sys.stdin)
print('llama  ', ' '.join('%s=%.1f'%('pp' if x['n_prompt'] else 'tg', x['avg_ts']) for x in d))"
  /work/old-delta/build/app/moechat-cli bench $F --policies resident --prompt-tokens 64 --decode-tokens 32 --threads 2 2>&1 | awk '/^resident/ {print "old     pp=" $3 " tg=" $4}'
  /work/main/build/app/moechat-cli bench $F --policies resident --prompt-tokens 64 --decode-tokens 32 --threads 2 2>&1 | awk '/^resident/ {print "new     pp=" $3 " tg=" $4}'
  uptime | sed 's/.*load/load/'
done
