#!/usr/bin/env bash
# Runs the probe's native tests: the core unit tests (ASan+UBSan), a
# multi-threaded SaveTensor stress per ABI through the real hook symbols
# (ASan+UBSan) and the same stress under TSan. The last line is
# "N passed, N failed". The independent cases run side by side, NATIVE_TEST_JOBS
# at a time (default: the number of cores); each one's output is printed whole, in
# the order below, when all are done.
set -u
BIN=${1:?usage: run_native_tests.sh <bin dir>}
pass=0
fail=0
work=$(mktemp -d /tmp/msp_native_XXXXXX)
trap 'rm -rf "$work"' EXIT
max_jobs=${NATIVE_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
njobs=0

# spawn CMD...: runs CMD in the background into $work/jobs/NN.out (a free slot first)
mkdir -p "$work/jobs"
spawn() {
    while [ "$(jobs -rp | wc -l)" -ge "$max_jobs" ]; do wait -n; done
    njobs=$((njobs + 1))
    ("$@") >"$work/jobs/$(printf %03d $njobs).out" 2>&1 &
}

# env_run VAR=VALUE... -- FUNCTION ARGS...: the function with those variables exported
# (in spawn's subshell, so they end with it)
env_run() {
    while [ "$1" != "--" ]; do export "$1"; shift; done
    shift
    "$@"
}

result() { # name rc
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "PASS $1"; else fail=$((fail + 1)); echo "FAIL $1"; fi
}

# the unit tests count their own checks: add them to the totals
"$BIN/test_core_asan" >"$work/unit.log" 2>&1
rc=$?
grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$work/unit.log"
read -r up uf < <(sed -n -E 's/^([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$work/unit.log")
if [ -n "${up:-}" ] && [ "$rc" -eq 0 ]; then
    pass=$((pass + up))
    echo "PASS unit-tests ($up checks)"
else
    fail=$((fail + ${uf:-0} + 1))
    echo "FAIL unit-tests (exit $rc)"
fi

# stress <name> <binary> [per-thread] [bytes] [budget]: 4 threads x 150 tensors
# of 4 KiB with a 64 KiB budget (the writers must keep up through the blocking
# policy), then every .bin and record is checked. With 1 MiB tensors, 4 x 8 of
# them: each goes to its file with O_DIRECT, its header before it (above the
# budget: alone, in the heap); with a 4 MiB budget they share the ring, and the
# writers give it back piece by piece as they write while the hooks wait for room.
stress() {
    local name=$1 bin=$2 per=${3:-150} bytes=${4:-4096} budget=${5:-65536} out="$work/$1"
    mkdir -p "$out/atb_dump_data/.probe"
    : >"$out/config.json"
    "$bin" publish "$out/atb_dump_data" state=1 task=3 exec=all save_child=0 budget=$budget || {
        result "$name" 1
        return
    }
    # hold the daemon lock so the shim does not start a control plane
    printf 'stress\t4\t%s\t%s\n' "$per" "$bytes" |
        flock "$out/atb_dump_data/.probe/daemon.lock" env ATB_OUTPUT_DIR="$out" \
            ATB_DUMP_CONFIG="$out/config.json" MSPROBE_ATB_ATTACH_WAIT_MS=0 \
            "$bin" >"$out/host.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        cat "$out/host.log"
        result "$name" $rc
        return
    fi
    python3 - "$out" "$per" "$bytes" <<'PY'
import glob, json, os, sys
out, per, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 4 * per
recs = [json.loads(l) for f in glob.glob(out + "/atb_dump_data/.probe/records/*.jsonl") for l in open(f)]
tensors = [r for r in recs if r["k"] == "tensor"]
bad = []
if len(tensors) != n or any(r["file"] != "bin" for r in tensors):
    bad.append("expected %d bin records, got %d" % (n, len(tensors)))
if sorted(r["seq"] for r in tensors) != list(range(n)):
    bad.append("seq numbers are not 0..%d" % (n - 1))
for r in tensors:
    path = os.path.join(out, "atb_dump_data/data", r["path"])
    blob = open(path, "rb").read()
    payload = blob.split(b"$End=1\n", 1)[1]
    parts = r["path"].split("/")
    t, i = int(parts[2].split("_")[0]), int(parts[-1][len("intensor"):-4])
    period = bytes((j * 31 + i * 7 + t) & 0xFF for j in range(256))  # 31 * 256 = 0 mod 256
    want = (period * (size // 256 + 1))[:size]
    if payload != want:
        bad.append("payload mismatch " + r["path"])
        break
    if r["stats"]["count"] != size or r["stats"]["max"] != max(want):
        bad.append("stats mismatch " + r["path"])
        break
ex = [r for r in recs if r["k"] == "exit"]
if not ex or not ex[0]["drained"]:
    bad.append("no drained exit record")
print("\n".join(bad) or "ok: %d tensors verified" % n)
sys.exit(1 if bad else 0)
PY
    rc=$?
    grep -E "ERROR|WARNING: ThreadSanitizer|runtime error" "$out/host.log" && rc=1
    result "$name" $rc
}

# The monitor and writer threads start at the first wake: asleep, the shim
# adds no thread to the host (main = 1); awake, the monitor and 2 writers.
lazy_writers() {
    local bin=$1 out="$work/lazy" got
    mkdir -p "$out/atb_dump_data/.probe"
    : >"$out/config.json"
    run_host() {
        printf 'update\nneed\nthreads\n' |
            flock "$out/atb_dump_data/.probe/daemon.lock" env ATB_OUTPUT_DIR="$out" \
                ATB_DUMP_CONFIG="$out/config.json" MSPROBE_ATB_ATTACH_WAIT_MS=0 \
                MSPROBE_ATB_WRITERS=2 "$bin" 2>>"$out/host.log"
    }
    "$bin" publish "$out/atb_dump_data" state=0 task=1 exec=all &&
        got=$(run_host | grep threads=) &&
        "$bin" publish "$out/atb_dump_data" state=1 task=1 exec=all &&
        got="$got $(run_host | grep threads=)"
    echo "lazy writers: asleep/awake: ${got:-no output}"
    [ "${got:-}" = "threads=1 threads=4" ]
    result lazy-writers $?
}
spawn lazy_writers "$BIN/stress_asan_abi1"

# IsSaveTensorInSpecificDir's cached verdicts (selcache.h) under threads: 4 host
# threads ask about the same dirs while config B (other filters, and a device
# filter, which is checked before the cache) replaces A mid-run. Every
# answer must be the one a fresh process gives under A or under B, and B's
# once B was published before the thread's UpdateConfig (each thread asks
# 3000 times under B).
dir_race() {
    local name=$1 bin=$2 out="$work/$1" a b
    mkdir -p "$out/atb_dump_data/.probe"
    : >"$out/config.json"
    local A="ids=2 names= save_child=0 devices=" B="ids= names=linear save_child=1 devices=1"
    printf '%s\n' 0_1/0/2_Layer 0_1/3/2_Layer/1_LinearOperation 0_1/0/2_Layer/1_LinearOperation/0_MatMulKernel \
        0_1/0/5_Layer 0_1/8/5_Layer/0_LinearOperation 0_1/8/5_Layer/0_LinearOperation/1_AddKernel \
        1_1/0/2_Layer/3_Other 1_1/2/2_Layer/1_LinearOperation LinearOpsRunner LinearOpsRunner/0_MatMulKernel 0_1/0 \
        >"$out/dirs"
    host() { # the config's fields, then a script on stdin
        "$bin" publish "$out/atb_dump_data" state=1 task=1 exec=all $1 &&
            flock "$out/atb_dump_data/.probe/daemon.lock" env ATB_OUTPUT_DIR="$out" \
                ATB_DUMP_CONFIG="$out/config.json" MSPROBE_ATB_ATTACH_WAIT_MS=0 "$bin" 2>>"$out/host.log"
    }
    answers() { # a fresh process's answers under config $1
        sed 's/^/dir\t/' "$out/dirs" | host "$1" | sed -n 's/^dir=//p' | tr -d '\n'
    }
    a=$(answers "$A") b=$(answers "$B")
    echo "dir race: answers under A $a, under B $b"
    local race
    race=$(printf 'dirrace\t4\t3000\t%s\t%s\t%s\t%s\n' "$out/dirs" "$a" "$b" "${B// /$'\t'}" | host "$A" | grep '^dirrace')
    echo "$race"
    [ "$a" != "$b" ] && [[ "$race" == "dirrace ok "* ]] &&
        ! grep -E "ERROR|WARNING: ThreadSanitizer|runtime error" "$out/host.log"
    result "$name" $?
}
# a publish leaves the old snapshot to the threads that may hold it (snapshot.c)
spawn env_run ASAN_OPTIONS=detect_leaks=0 -- dir_race dir-race-asan "$BIN/stress_asan_abi1"
spawn env_run TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" -- dir_race dir-race-tsan "$BIN/stress_tsan_abi1"

spawn stress stress-asan-abi0 "$BIN/stress_asan_abi0"
spawn stress stress-asan-abi1 "$BIN/stress_asan_abi1"
spawn env_run TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" -- stress stress-tsan-abi1 "$BIN/stress_tsan_abi1"
spawn stress stress-asan-large "$BIN/stress_asan_abi1" 8 $((1 << 20))
spawn env_run TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" -- stress stress-tsan-large "$BIN/stress_tsan_abi1" 8 $((1 << 20))
spawn stress stress-asan-large-ring "$BIN/stress_asan_abi1" 8 $((1 << 20)) $((4 << 20))
spawn env_run TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" -- stress stress-tsan-large-ring "$BIN/stress_tsan_abi1" 8 $((1 << 20)) $((4 << 20))

wait
# each case's output in order; its PASS/FAIL lines count once each
for f in "$work"/jobs/*.out; do
    cat "$f"
    pass=$((pass + $(grep -c '^PASS ' "$f")))
    fail=$((fail + $(grep -c '^FAIL ' "$f")))
    grep -q -E '^(PASS|FAIL) ' "$f" || { fail=$((fail + 1)); echo "FAIL $(basename "$f"): no verdict"; }
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
