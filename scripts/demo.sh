#!/usr/bin/env bash
# `make demo`: the main job end to end on the bundled stand-in ATB model.
#   Part 1, live: load the probe, start a 2-device service, wake the probe,
#   dump one layer with a live config edit, go back to sleep, unload.
#   Part 2, offline: a golden fp32 run and an fp16 run with an injected Inf;
#   find the first bad op and the first divergence.
#   Part 3, the flight recorder: a service armed for hours
#   writes nothing until an fp16 -inf shows up, then the rounds around it.
#   Part 4, golden from PyTorch: a Hugging Face Llama dumped in torch, the ATB model
#   of the same checkpoint compared with it op by op.
# Everything lands in demo_out/ (or $DEMO_OUT). DEMO_PARTS="live offline recorder torch"
# (the default) picks the parts to run.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${DEMO_OUT:-$repo/demo_out}
py=$repo/.venv/bin/python
msprobe=$repo/.venv/bin/msprobe-atb
atb_home=$repo/build/atbsim/cxx_abi_1
atbsim=$atb_home/bin/atbsim

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

# An editor-style save: write a temporary file, rename it over the config.
save_config() {
    printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"
}

# One chat request: prints the reply's tokens, or the service's error (exit 1).
request() {
    "$py" - "$1" <<'EOF'
import json, sys, urllib.error, urllib.request
body = json.dumps({"model": "demo", "messages": [{"role": "user", "content": "hello"}],
                   "max_tokens": 4}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", body,
                             {"Content-Type": "application/json"})
try:
    reply = json.load(urllib.request.urlopen(req, timeout=60))
except urllib.error.HTTPError as e:
    err = json.loads(e.read() or b"{}").get("error") or e.reason
    print(f"error {e.code}:", err.get("message") if isinstance(err, dict) else err)
    sys.exit(1)
print("  reply tokens:", reply.get("tokens"))
EOF
}

# Starts `atbsim serve ARGS` logging to LOG, killed if the demo stops early; sets $service
# (its pid) and $port once it says its daemons are up.
start_service() {
    local log=$1
    shift
    "$atbsim" serve "$@" >"$log" 2>&1 &
    service=$!
    trap 'kill $service 2>/dev/null || true' EXIT
    for _ in $(seq 1 300); do
        grep -q 'Daemon start success!' "$log" && break
        sleep 0.1
    done
    port=$(sed -n 's/.*Listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)
}

# `msprobe-atb wait DIR`: returns once the config file as it is now is in force, every
# selected tensor is written and statistic.csv is built (no need to watch the folder
# size, as with msProbe).

parts=" ${DEMO_PARTS:-live offline recorder torch} "
want() { [[ $parts == *" $1 "* ]]; }

rm -rf "$out"
mkdir -p "$out"
# shellcheck disable=SC1091
source "$atb_home/set_env.sh"

if want live; then
mkdir -p "$out/live"
cfg=$out/live/config.json

step "1. Load the probe into this shell (stand-in ATB, C++11 ABI build)"
# shellcheck disable=SC1091
source "$repo/scripts/load_atb_probe.sh" --output="$out/live" --config="$cfg"

step "2. Start the inference service: 2 devices, one worker process each"
start_service "$out/live/service.log" --devices 2 --port 0 --layers 4
echo "  service is up on port $port"

step "3. Wake the probe up: dump_enable true, exec_range \"none\"; send a request"
cp "$repo/configs/wake_up.json" "$cfg"
"$msprobe" wait "$out/live" >/dev/null
request "$port"
grep 'Ready to dump ATB data' "$out/live/service.log" | sed 's/^/  service: /'

step "4. Live edit: dump layer 2 with its child ops and kernels, tensors and statistics"
save_config "$cfg" '{"task": "all", "dump_enable": true, "exec_range": "all", "ids": "2",
 "op_name": "", "save_child": true, "device": "", "filter_level": 1}'
"$msprobe" wait "$out/live" >/dev/null
request "$port"
show "$msprobe" wait "$out/live"
show "$msprobe" status "$out/live"
data=$out/live/atb_dump_data/data
echo "  dumped op directories (first dumped round of each device; round numbers are ATB's"
echo "  execution counts, which kept counting while the probe dumped nothing):"
for dev in "$data"/*/; do
    first=$(ls -d "$dev"*/ | sort -t/ -k1,1 | head -1)
    find "$first" -mindepth 1 -maxdepth 2 -type d | sed "s|$data/|    |" | sort | head -5
done
csv=$(ls "$data"/*/*/statistic.csv | head -1)
echo "  $csv (first rows):"
head -4 "$csv" | cut -c1-200 | sed 's/^/    /'

step "5. A bad edit is refused and the previous config stays in force"
save_config "$cfg" '{"task": "tensors", "dump_enable": "true"}'
show "$msprobe" wait "$out/live" || true  # exit 4: refused, and why
sleep 1
# each process says it once, with its pid and device, wrapped
awk '/config rejected/ {on = 1; print; next} on && /^\[msprobe-atb\]   / {print; next}
     on {exit}' "$out/live/service.log" | sed 's/^/  service: /'

step "6. Back to sleep: dump_enable false; a request dumps nothing more"
before=$(find "$data" -name '*.bin' | wc -l)
save_config "$cfg" '{"dump_enable": false}'
"$msprobe" wait "$out/live" >/dev/null
request "$port"
echo "  .bin files before: $before, after: $(find "$data" -name '*.bin' | wc -l)"

step "7. Stop the service and unload the probe"
kill -TERM "$service"
wait "$service" || true
trap - EXIT
# shellcheck disable=SC1091
source "$repo/scripts/unload_atb_probe.sh"
echo "  LD_PRELOAD='${LD_PRELOAD:-}'"
fi

if want offline; then
step "8. Offline: golden fp32 run vs fp16 run with an Inf injected into layer 1 (op 2_Prefill_layer), SwiGLU"
dump_config='{"task": "all", "dump_enable": true, "exec_range": "0,1", "ids": "",
 "op_name": "", "save_child": true, "device": "", "filter_level": 0}'
for run in golden target; do
    mkdir -p "$out/$run"
    save_config "$out/$run/config.json" "$dump_config"
done
# shellcheck disable=SC1091
source "$repo/scripts/load_atb_probe.sh" --output="$out/golden" --config="$out/golden/config.json" >/dev/null
"$atbsim" run --dtype fp32 --layers 4 --decode-steps 2 | sed 's/^/  golden: /'
# shellcheck disable=SC1091
source "$repo/scripts/load_atb_probe.sh" --output="$out/target" --config="$out/target/config.json" >/dev/null
"$atbsim" run --dtype fp16 --layers 4 --decode-steps 2 --inject inf:layer=1,op=SwiGLU,round=0 |
    sed 's/^/  target: /'
# shellcheck disable=SC1091
source "$repo/scripts/unload_atb_probe.sh" >/dev/null
for run in golden target; do "$msprobe" wait "$out/$run" | sed 's/^/  /'; done

show "$msprobe" stats "$out/target"
# compare exits 1 when tensors fail, like diff: here that is the expected finding
# (3 would mean it could not compare enough to tell). The workbook is what msProbe
# users open; -o DIR writes it and a CSV under msProbe's result file names.
show "$msprobe" compare -m atb -gp "$out/golden" -tp "$out/target" -o "$out/compare.xlsx" || true
show "$msprobe" report "$out/target" --golden "$out/golden" -o "$out/report.html"

step "8b. Is it the op? Replay recomputes each op from the dump in float64, no golden needed"
echo "  act 8's fp16 target: SwiGLU's output holds an Inf its inputs cannot give"
show "$msprobe" replay "$out/target" --all --round 0 --golden "$out/golden" || true
echo "  a run whose layer-1 GateUp output is scaled by 300: SwiGLU's true result leaves fp16's range"
mkdir -p "$out/scaled"
save_config "$out/scaled/config.json" "$dump_config"
"$msprobe" run --output "$out/scaled" --config "$out/scaled/config.json" -- "$atbsim" run \
    --dtype fp16 --layers 4 --decode-steps 2 --inject scale=300:layer=1,op=GateUp,round=0 \
    >/dev/null 2>&1
show "$msprobe" replay "$out/scaled" --op 2_10 --op 2_11 --op 2_12 --round 0 || true
fi

if want recorder; then
step "9. Flight recorder: an fp16 -inf after many requests, on one device only"
rec=$out/recorder
mkdir -p "$rec"
save_config "$rec/config.json" '{"task": "tensor", "dump_enable": true, "exec_range": "all",
 "ids": "", "save_child": true,
 "recorder": {"keep_rounds": 3, "budget_mb": 256, "triggers": ["nan", "inf"],
              "after_rounds": 1, "max_incidents": 1}}'
# shellcheck disable=SC1091
source "$repo/scripts/load_atb_probe.sh" --output="$rec" --config="$rec/config.json" >/dev/null
start_service "$rec/service.log" --devices 2 --port 0 --layers 4 \
    --inject -inf:layer=2,op=Down,round=21,device=1
echo "  sending 20 requests; armed, the recorder keeps the last rounds in memory and writes nothing"
for _ in $(seq 0 19); do request "$port" >/dev/null; done
echo "  20 requests served, armed: round directories on disk: $(find "$rec/atb_dump_data/data" \
    -mindepth 2 -maxdepth 2 -type d 2>/dev/null | wc -l)"
"$msprobe" status "$rec" | grep -E '^ +recorder|^recorder:' | sed 's/^ */  /'
echo "  10 more requests. At its prefill round 21 (request 22: rounds count from 0), device 1's"
echo "  layer-2 Down op gives a -inf (the injected fault): the recorder fires, every device writes"
echo "  the rounds it holds and the next one, and the service answers that request with an error"
echo "  (the devices' answers differ)."
for i in $(seq 21 30); do
    answer=$(request "$port" 2>&1) || true
    echo "  request $i: ${answer#  }; incident reports: $(find "$rec/atb_dump_data/incidents" \
        -name 'incident-*.json' 2>/dev/null | wc -l)"
done
kill -TERM "$service"
wait "$service" || true
trap - EXIT
# shellcheck disable=SC1091
source "$repo/scripts/unload_atb_probe.sh" >/dev/null
"$msprobe" wait "$rec" | sed 's/^/  /'
# prefill and decode count their rounds apart: stats names each round by its model
echo "  rounds on disk now, per process and model:"
"$msprobe" stats "$rec" | grep -E '^  process ' | sed 's/^ */    /'

show "$msprobe" incidents "$rec"
fi
if want torch; then
step "10. Golden from PyTorch: a Hugging Face Llama in torch (fp32, CPU), its ATB model compared with it"
ckpt=$out/tiny_llama
"$py" "$repo/scripts/tiny_llama.py" "$ckpt" >/dev/null 2>&1
echo "  a random tiny Llama checkpoint (2 layers, hidden 64): $ckpt"
save_config "$out/torch.json" '{"task": "tensor", "dump_enable": true, "exec_range": "all",
 "save_child": true}'
prompt=1,17,42,99,5,250,3,64
echo "  the golden: a plain generate script, dumped by msprobe-atb run --torch"
tokens=$("$msprobe" run --torch --output "$out/torch_golden" --config "$out/torch.json" -- \
    "$py" "$repo/scripts/hf_generate.py" "$ckpt" "$prompt" 2>/dev/null | sed -n 's/^tokens //p')
echo "  torch generated $tokens; the ATB model runs the same ids (its decode steps fed them),"
echo "  with an Inf injected into layer 1's SwiGLU"
"$msprobe" run --output "$out/atb_target" --config "$out/torch.json" -- "$atbsim" run \
    --weights "$ckpt" --dtype fp32 --prompt-ids "$prompt" --decode-ids "${tokens%,*}" \
    --inject inf:layer=1,op=SwiGLU,round=0 >/dev/null 2>&1
show "$msprobe" compare -gp "$out/torch_golden" -tp "$out/atb_target" \
    -o "$out/torch_compare.csv" || true
show "$msprobe" report "$out/atb_target" --golden "$out/torch_golden" -o "$out/torch_report.html"
fi
printf '\nDone. Everything is in %s (open report.html in a browser).\n' "$out"
