#!/usr/bin/env bash
# Creates the project's virtualenv and installs everything the build, the tests
# and the demo need. Runs on a fresh machine that has only the OS toolchain.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}

need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
command -v g++ >/dev/null || need_apt+=(g++)
command -v nm >/dev/null || need_apt+=(binutils)
"$python" -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# Headless Chromium renders the offline HTML report in tests/offline.
command -v chromium >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing system packages: ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# torch first, pinned to the CPU build: a bare range lets pip pick a CUDA build of several GB,
# and the tests of the PyTorch golden (the `torch` extra) run on the CPU.
"$venv/bin/python" -c 'import torch' 2>/dev/null || "$venv/bin/python" -m pip install -q "torch==2.13.0"
"$venv/bin/python" -m pip install -q -e ".[dev,torch]"
