# shellcheck shell=bash
# Load the msprobe-atb dump probe into this shell (source it, do not run it):
#
#   source scripts/load_atb_probe.sh [--output=DIR] [--config=FILE]
#
# Same contract as msProbe's load_atb_probe.sh: --output defaults to the
# current directory, --config to config.json beside this script; exports
# ATB_OUTPUT_DIR, ATB_DUMP_CONFIG and LD_PRELOAD (the shim matching the C++ ABI
# of $ATB_HOME_PATH), plus MSPROBE_ATB_PYTHON for the control plane, and puts
# the `msprobe-atb` command (scripts/bin) on PATH. Every ATB
# process started from this shell afterwards can then be dumped by editing the
# config while it runs. Undo with unload_atb_probe.sh.
#
# Nothing is exported unless everything checks out: on a problem it says why
# and leaves the shell as it was.

# Run as a program it could not change the caller's environment: say so before anything else.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "[msprobe-atb] source this script, do not run it: source $0 [--output=DIR] [--config=FILE]" >&2
    exit 1
fi

_msprobe_atb_usage() {
    cat <<'USAGE'
usage: source load_atb_probe.sh [--output=DIR] [--config=FILE]

Loads the msprobe-atb dump probe into this shell: every ATB process started from it
afterwards can be dumped by editing the config while it runs.
  --output=DIR   where atb_dump_data/ is written (default: the current directory)
  --config=FILE  the dump config to watch, JSON or YAML (default: config.json beside
                 this script); it may be created later
Undo with: source unload_atb_probe.sh
USAGE
}

_msprobe_atb_load() {
    local here repo
    here=$(cd -- "$(dirname -- "${BASH_SOURCE[1]}")" && pwd -P) || return 1
    repo=$(dirname -- "$here")
    local warn="[msprobe-atb] WARNING:"

    if [ "$#" -gt 2 ]; then
        echo "$warn expected at most 2 arguments (--output=DIR --config=FILE), got $#." \
            "The probe is not loaded." >&2
        return 1
    fi
    local output="$PWD" config="$here/config.json" arg
    for arg in "$@"; do
        case "$arg" in
        -h | --help)
            _msprobe_atb_usage
            return 2
            ;;
        --output=*) output=${arg#--output=} ;;
        --config=*) config=${arg#--config=} ;;
        *)
            echo "$warn unknown argument '$arg' (use --output=DIR and --config=FILE, with '=')." \
                "The probe is not loaded." >&2
            return 1
            ;;
        esac
    done
    if [ -z "$output" ] || [ -z "$config" ]; then
        echo "$warn --output= and --config= need a value. The probe is not loaded." >&2
        return 1
    fi
    case "$output" in /*) ;; *) output="$PWD/$output" ;; esac
    case "$config" in /*) ;; *) config="$PWD/$config" ;; esac
    output=${output%/}
    [ -n "$output" ] || output=/

    # ---- the ATB environment and its C++ ABI ----
    local home=${ATB_HOME_PATH:-}
    if [ -z "$home" ]; then
        echo "$warn the running environment of ATB is not ready: ATB_HOME_PATH is not set." \
            "Source ATB's set_env.sh first. The probe is not loaded." >&2
        return 1
    fi
    local abi=""
    case "${home%/}" in
    *cxx_abi_0) abi=0 ;;
    *cxx_abi_1) abi=1 ;;
    *)
        local syms
        if [ -f "$home/lib/libatb.so" ] && syms=$(nm -D --defined-only "$home/lib/libatb.so" 2>/dev/null); then
            if grep -q '_ZN3atb5Probe10SaveTensorERKNSt7__cxx11' <<<"$syms"; then
                abi=1
            elif grep -q '_ZN3atb5Probe10SaveTensorERKSs' <<<"$syms"; then
                abi=0
            fi
        fi
        ;;
    esac
    if [ ! -d "$home" ]; then
        echo "$warn the running environment of ATB is not ready: ATB_HOME_PATH=$home does" \
            "not exist. Source the set_env.sh of your ATB installation first. The probe is" \
            "not loaded." >&2
        return 1
    fi
    if [ -z "$abi" ]; then
        echo "$warn the running environment of ATB is not ready: ATB_HOME_PATH=$home neither" \
            "ends in cxx_abi_0/cxx_abi_1 nor holds a lib/libatb.so whose atb::Probe symbols" \
            "show the C++ ABI. The probe is not loaded." >&2
        return 1
    fi

    # ---- the shim ----
    local shim="$repo/build/lib/libatb_probe_abi$abi.so"
    if [ ! -f "$shim" ]; then
        echo "$warn $shim is not built. Run 'make' in $repo, then source this script again." \
            "The probe is not loaded." >&2
        return 1
    fi
    case "$shim" in
    *' '* | *:*)
        # ld.so splits LD_PRELOAD at spaces and colons: preload a link instead
        local linkdir="${TMPDIR:-/tmp}/msprobe-atb-$(id -u)"
        if ! mkdir -p -m 700 -- "$linkdir" || ! ln -sfn -- "$shim" "$linkdir/libatb_probe_abi$abi.so"; then
            echo "$warn $shim has a space or ':' in its path, which LD_PRELOAD cannot hold," \
                "and no link could be made in $linkdir. The probe is not loaded." >&2
            return 1
        fi
        shim="$linkdir/libatb_probe_abi$abi.so"
        ;;
    esac

    # ---- output dir: created now, so a bad one is reported here and not by every process ----
    local mkdir_err
    if ! mkdir_err=$(mkdir -p -- "$output" 2>&1) || [ ! -w "$output" ] || [ ! -x "$output" ]; then
        echo "$warn the output dir $output cannot be created or written${mkdir_err:+ ($mkdir_err)}." \
            "Choose another with --output=DIR. The probe is not loaded." >&2
        return 1
    fi

    # ---- the config, checked by the control plane ----
    local py="python3"
    [ -x "$repo/.venv/bin/python" ] && py="$repo/.venv/bin/python"
    local state="asleep until $config exists with \"dump_enable\": true"
    if [ -e "$config" ]; then
        if [ ! -r "$config" ]; then
            echo "$warn the config $config cannot be read. Fix its permissions or choose" \
                "another with --config=FILE. The probe is not loaded." >&2
            return 1
        fi
        local report rc=0
        report=$(cd -- "$repo" && "$py" -m msprobe_atb check "$config" 2>&1) || rc=$?
        if [ $rc -eq 0 ]; then
            if ! grep -Eq '^ +dump_enable +true$' <<<"$report"; then
                state="asleep: set \"dump_enable\": true in $config to start dumping"
            elif grep -Eq '^ +recorder +\{' <<<"$report"; then
                state="armed: the flight recorder writes nothing until a trigger fires"
            else
                state="awake: dumping starts with the first operation"
            fi
        elif [ $rc -eq 1 ]; then
            state="asleep until the config is fixed (edits take effect while the model runs)"
        else
            report="(the config could not be checked: $py -m msprobe_atb check failed with" \
                "exit code $rc; the control plane will report problems when it starts)"$'\n'"$report"
        fi
        sed 's/^/[msprobe-atb]   /' <<<"$report"
    else
        # A near name beside it is more likely a typo than a config still to be written.
        local near
        near=$("$py" -c 'import difflib, os, sys
d, n = os.path.split(sys.argv[1])
names = [f for f in os.listdir(d or ".") if f.endswith((".json", ".yaml", ".yml"))]
print("\n".join(difflib.get_close_matches(n, names, n=1, cutoff=0.75)))' "$config" 2>/dev/null)
        if [ -n "$near" ]; then
            echo "$warn the config $config does not exist, but $(dirname -- "$config")/$near" \
                "does: did you mean --config=$(dirname -- "$config")/$near? The probe is not" \
                "loaded." >&2
            return 1
        fi
        echo "[msprobe-atb] $config does not exist yet; that is fine: create it (or edit it)" \
            "at any time and running processes pick it up."
    fi

    # ---- all good: export, with our shim exactly once in front of LD_PRELOAD ----
    local entry kept=""
    local -a entries=()
    IFS=': ' read -r -a entries <<<"${LD_PRELOAD:-}"
    for entry in "${entries[@]}"; do
        case "${entry##*/}" in libatb_probe_abi0.so | libatb_probe_abi1.so) continue ;; esac
        kept="${kept:+$kept:}$entry"
    done
    export LD_PRELOAD="$shim${kept:+:$kept}"
    export ATB_OUTPUT_DIR="$output"
    export ATB_DUMP_CONFIG="$config"
    export MSPROBE_ATB_PYTHON="$py"
    # the msprobe-atb command, once; unload removes it only if load added it
    case ":${PATH:-}:" in
    *":$here/bin:"*) ;;
    *)
        export PATH="$here/bin${PATH:+:$PATH}"
        export MSPROBE_ATB_PATH_ADDED="$here/bin"
        ;;
    esac
    echo "[msprobe-atb] probe loaded for ATB processes started from this shell" \
        "(C++ ABI $abi: $shim)"
    echo "[msprobe-atb]   output: $output/atb_dump_data"
    echo "[msprobe-atb]   config: $config"
    echo "[msprobe-atb]   state:  $state"
    return 0
}
_msprobe_atb_load "$@"
_msprobe_atb_rc=$?
unset -f _msprobe_atb_load _msprobe_atb_usage
# -h/--help is not an error
[ $_msprobe_atb_rc -eq 2 ] && _msprobe_atb_rc=0
return $_msprobe_atb_rc
