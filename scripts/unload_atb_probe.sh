# shellcheck shell=bash
# Undo load_atb_probe.sh in this shell (source it): removes the probe from
# LD_PRELOAD (other entries are kept), asks the control plane of the output
# dir to finish once its processes have exited, unsets ATB_OUTPUT_DIR,
# ATB_DUMP_CONFIG and MSPROBE_ATB_PYTHON, and takes scripts/bin (the
# msprobe-atb command) off PATH if load put it there.

_msprobe_atb_unload() {
    local entry kept="" removed=0
    local -a entries=()
    IFS=': ' read -r -a entries <<<"${LD_PRELOAD:-}"
    for entry in "${entries[@]}"; do
        case "${entry##*/}" in
        libatb_probe_abi0.so | libatb_probe_abi1.so) removed=1 ;;
        *) kept="${kept:+$kept:}$entry" ;;
        esac
    done
    if [ -n "$kept" ]; then
        export LD_PRELOAD="$kept"
    else
        unset LD_PRELOAD
    fi
    if [ -n "${ATB_OUTPUT_DIR:-}" ]; then
        local py=${MSPROBE_ATB_PYTHON:-python3}
        local here repo
        here=$(cd -- "$(dirname -- "${BASH_SOURCE[1]}")" && pwd -P)
        repo=$(dirname -- "$here")
        if ! (cd -- "$repo" && "$py" -m msprobe_atb daemon --stop --output "$ATB_OUTPUT_DIR"); then
            echo "[msprobe-atb] WARNING: could not ask the control plane of $ATB_OUTPUT_DIR" \
                "to stop ($py -m msprobe_atb daemon --stop failed); it stops by itself once" \
                "its processes have exited." >&2
        fi
    fi
    local had_vars=""
    [ -n "${ATB_OUTPUT_DIR:-}${ATB_DUMP_CONFIG:-}${MSPROBE_ATB_PYTHON:-}" ] && had_vars=1
    unset ATB_OUTPUT_DIR ATB_DUMP_CONFIG MSPROBE_ATB_PYTHON
    if [ -n "${MSPROBE_ATB_PATH_ADDED:-}" ]; then
        local dir out=""
        local -a dirs=()
        IFS=':' read -r -a dirs <<<"${PATH:-}"
        for dir in "${dirs[@]}"; do
            [ "$dir" = "$MSPROBE_ATB_PATH_ADDED" ] || out="${out:+$out:}$dir"
        done
        export PATH="$out"
        unset MSPROBE_ATB_PATH_ADDED
    fi
    if [ "$removed" = 1 ]; then
        echo "[msprobe-atb] probe unloaded: processes started from this shell are no longer probed"
    elif [ -n "$had_vars" ]; then
        echo "[msprobe-atb] the probe was not in LD_PRELOAD; its variables are cleared"
    else
        echo "[msprobe-atb] the probe is not loaded in this shell; nothing to undo"
    fi
}
_msprobe_atb_unload
unset -f _msprobe_atb_unload
return 0 2>/dev/null || exit 0
