"""The shim exports exactly ATB's hook symbols (docs/atb_hooks.md §1.3) for its ABI,
nothing else, and needs no libstdc++."""

from __future__ import annotations

import subprocess

from testkit import (
    HOOKS_MSPROBE_EXTRAS,
    HOOKS_NEUTRAL,
    dynamic_symbols,
    hooks_by_abi,
    shim_lib,
    speed_hooks,
)


def expected(abi: int) -> set[str]:
    """docs/atb_hooks.md §1.3 for this ABI, plus msProbe's legacy extras; never ATB's helpers."""
    return set(HOOKS_NEUTRAL | HOOKS_MSPROBE_EXTRAS | hooks_by_abi(abi) | speed_hooks(abi))


def test_exports_exactly_the_hooks(abi):
    exported = set(dynamic_symbols(shim_lib(abi)))
    assert exported == expected(abi)
    # never the ATB helpers or msProbe's Mki:: helpers
    assert not any("ToProbeTensor" in s or "Mki" in s for s in exported)


def test_needs_no_libstdcxx(abi):
    dyn = subprocess.run(["readelf", "-d", str(shim_lib(abi))], check=True, capture_output=True,
                         text=True).stdout
    needed = [line for line in dyn.splitlines() if "NEEDED" in line]
    assert needed and not any("stdc++" in n or "libgcc_s" in n for n in needed)


def test_thread_state_costs_no_call(abi):
    """The hooks' thread-local words (a thread's top-level op, its unmapped ops,
    its op count) are initial-exec TLS, read at a fixed offset from %fs: the
    general-dynamic model costs every awake op a __tls_get_addr call or two
    (native/probe.mk: -ftls-model). The shim is preloaded, so it has static
    TLS space anyway."""
    out = subprocess.run(["nm", "-D", "--undefined-only", str(shim_lib(abi))], check=True,
                         capture_output=True, text=True).stdout
    assert "__tls_get_addr" not in out


def test_loading_alone_does_nothing(tmp_path, abi):
    """Every process of the user's shell gets the preload: without a hook call
    it must not create files, start threads or print anything."""
    import os

    env = {**os.environ, "LD_PRELOAD": str(shim_lib(abi)), "ATB_OUTPUT_DIR": str(tmp_path),
           "ATB_DUMP_CONFIG": str(tmp_path / "c.json")}
    p = subprocess.run(["bash", "-c", "ls / >/dev/null && grep Threads /proc/self/status"],
                       env=env, capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["Threads:", "1"] and p.stderr == ""
    assert list(tmp_path.iterdir()) == []
