"""What every test folder shares: build artifact paths, waiting, editor-style
config saves, ATB's hook symbols (docs/atb_hooks.md §1.3), and a circle
in a graph (imports, native/core's uses).

Importable as `testkit` from any test module: pytest puts tests/ on sys.path
because tests/conftest.py lives there."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build"
ABIS = (0, 1)


def atb_home(abi: int) -> Path:
    """The stand-in ATB install for one libstdc++ ABI (ATB_HOME_PATH)."""
    return BUILD / "atbsim" / f"cxx_abi_{abi}"


def atbsim_bin(abi: int) -> Path:
    return atb_home(abi) / "bin" / "atbsim"


def shim_lib(abi: int) -> Path:
    return BUILD / "lib" / f"libatb_probe_abi{abi}.so"


def wait_until(pred, timeout: float = 30.0, step: float = 0.02, what: str = "condition"):
    """Polls pred() until it returns something truthy, which is returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def mount_tmpfs(d: Path, size_kib: int) -> str | None:
    """Mounts a fresh tmpfs on the new dir d; why not (mount's words), or None."""
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs",
                        str(d)], capture_output=True, text=True)
    return (r.stderr.strip() or "mount failed") if r.returncode != 0 else None


def unmount(d: Path) -> None:
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _mount(d: Path, size_kib: int) -> None:
    import pytest

    why = mount_tmpfs(d, size_kib)
    if why is not None:
        pytest.skip(f"cannot mount a tmpfs ({why}); tests of full or "
                    "separate file systems need root or CAP_SYS_ADMIN")


def scratch_dir(d: Path, size_kib: int):
    """For a fixture to yield from: the new dir d as a tmpfs of up to size_kib
    (tens of thousands of small files made and removed at memory speed, whatever
    a shared disk is doing; a SIGKILL loses nothing written to it either), or a
    plain dir where mounting is refused. Unmounted at teardown."""
    mounted = mount_tmpfs(d, size_kib) is None
    yield d
    if mounted:
        unmount(d)


def tmpfs_mounter(base):
    """mount(size_kib, name) -> a fresh tmpfs at base()/name (skips if mounting is
    refused); for a fixture to yield from: it unmounts them all at teardown."""
    mounts: list[Path] = []

    def mount(size_kib: int, name: str = "fs") -> Path:
        d = base() / name
        _mount(d, size_kib)
        mounts.append(d)
        return d

    yield mount
    for d in reversed(mounts):
        unmount(d)


def manifest_rows(dump_root: Path):
    """Every row of a dump's Parquet manifest, partition columns included, in a
    fixed order (host, device, pid, round, round_seq)."""
    import polars as pl

    files = sorted((dump_root / "manifest").glob("host=*/device=*/pid=*/*.parquet"))
    return pl.read_parquet(files, hive_partitioning=True).sort(
        ["host", "device", "pid", "round", "round_seq"])


DERIVED = ("statistic.csv", "statistic_extra.csv", "ROUND_COMPLETE.json")


def derived_files(root: Path) -> dict[str, bytes]:
    """What the daemon (and `rebuild`) derive from the record logs, by path
    relative to the dump root (the manifest apart: compare manifest_rows). The
    op dirs below a round dir (data/{dev}_{pid}/{exec}/...) hold the shim's
    files only, and are not walked: a long run has tens of thousands."""
    files = {}
    for base, dirs, names in os.walk(root):
        rel = Path(base).relative_to(root)
        if rel.parts[:1] == ("data",) and len(rel.parts) == 3:
            dirs.clear()
        for name in names:
            if name in DERIVED or rel.parts[:1] == ("info",):
                files[str(rel / name)] = (Path(base) / name).read_bytes()
    return files


def csv_row_count(path: Path) -> int | None:
    """The rows of a CSV file below its header; None if there is no such file."""
    try:
        with open(path, newline="") as f:
            return max(0, sum(1 for _ in csv.reader(f)) - 1)
    except FileNotFoundError:
        return None


def round_counts(root: Path) -> dict[str, tuple[int | None, int | None, int | None]]:
    """Per round dir of a dump root ("{dev}_{pid}/{exec}"): the rows of its
    statistic.csv and of its statistic_extra.csv, and the `rows` its
    ROUND_COMPLETE.json says; None where the file is missing."""
    out = {}
    for d in sorted((root / "data").glob("*/*")):
        if not d.is_dir():
            continue
        try:
            marker = json.loads((d / "ROUND_COMPLETE.json").read_bytes())["rows"]
        except FileNotFoundError:
            marker = None
        out[f"{d.parent.name}/{d.name}"] = (csv_row_count(d / "statistic.csv"),
                                            csv_row_count(d / "statistic_extra.csv"), marker)
    return out


def save_config(path: Path, raw: str | None = None, **fields) -> None:
    """Saves a config the way editors do: a temporary file renamed into place.
    `raw` is written as is (for broken or YAML content), else the fields as JSON."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(raw if raw is not None else json.dumps(fields, indent=4))
    os.replace(tmp, path)


SHIM_PREFIX = "[msprobe-atb] "
SHIM_CONTINUED = SHIM_PREFIX + "  "  # a wrapped console message's next lines
SHIM_WIDTH = 100  # util.h MSP_LOG_WIDTH: the columns the shim wraps its messages at


def shim_message_lines(lines: list[str], head: str) -> list[list[str]]:
    """The shim's console messages holding `head` on their first line, each as its
    lines (it wraps long ones at 100 columns, indenting the continuations)."""
    out: list[list[str]] = []
    taking = False
    for line in lines:
        if taking and line.startswith(SHIM_CONTINUED):
            out[-1].append(line)
            continue
        taking = head in line
        if taking:
            out.append([line])
    return out


def unwrapped_lines(message_lines: list[str]) -> list[str]:
    """The lines of a shim message wider than SHIM_WIDTH that it could have broken:
    only one word too long for a line (a path the user gave, kept whole for copying)
    may run past the width, on a line of its own."""
    return [line for line in message_lines if len(line) > SHIM_WIDTH
            and len(line.removeprefix(SHIM_CONTINUED).removeprefix(SHIM_PREFIX).split()) > 1]


def shim_messages(lines: list[str], head: str) -> list[str]:
    """shim_message_lines, each message joined back into one line."""
    return [" ".join([m[0], *(c[len(SHIM_CONTINUED):] for c in m[1:])])
            for m in shim_message_lines(lines, head)]


def dynamic_symbols(lib: Path) -> dict[str, str]:
    """Defined dynamic symbols of a shared library: name -> nm type letter."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True,
                         capture_output=True, text=True).stdout
    return {parts[2]: parts[1] for parts in (line.split() for line in out.splitlines())
            if len(parts) == 3}


def fnv1a64(data: bytes) -> str:
    """The payload hash atbsim's ATBSIM_SAVE_TRACE records (64-bit FNV-1a, hex)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# ---- the hook surface, docs/atb_hooks.md §1.3 ----
HOOKS_NEUTRAL = frozenset("""
_ZN3atb5Probe16IsSaveTensorDataEv _ZN3atb5Probe16IsSaveTensorDescEv
_ZN3atb5Probe18IsSaveTensorBeforeEv _ZN3atb5Probe17IsSaveTensorAfterEv
_ZN3atb5Probe21IsExecuteCountInRangeEm _ZN3atb5Probe12IsSaveTilingEv
_ZN3atb5Probe11IsSaveParamEv _ZN3atb5Probe29ReportOperationIOTensorEnableEv
_ZN3atb5Probe30ReportOperationStatisticEnableEv _ZN3atb5Probe26ReportKernelIOTensorEnableEv
_ZN3atb5Probe26ReportOperationGraphEnableEv _ZN3atb5Probe15IsOverflowCheckEv
_ZN3atb5Probe14IsOverflowStopEv _ZN3atb5Probe12UpdateConfigEv
""".split())
# msProbe's legacy extras: declared by older ATB only, harmless to define.
HOOKS_MSPROBE_EXTRAS = frozenset("""
_ZN3atb5Probe11IsSaveChildEv _ZN3atb5Probe14IsSaveIntensorEv _ZN3atb5Probe15IsSaveOuttensorEv
""".split())
_S = {0: "Ss", 1: "NSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"}
# Back-references to the first std::string differ with the ABI's substitution table.
_S2 = {0: "S2_", 1: "S8_"}
_VEC = {0: "RKSt6vectorINS0_6TensorESaIS4_EES8_", 1: "RKSt6vectorINS0_6TensorESaISA_EESE_"}


def hooks_by_abi(abi: int) -> frozenset[str]:
    """The atb::Probe hooks whose mangled names depend on the ABI."""
    s, s2, vec = _S[abi], _S2[abi], _VEC[abi]
    return frozenset({
        f"_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERK{s}",
        f"_ZN3atb5Probe10SaveTensorERK{s}{s2}{s2}PKvm{s2}",
        f"_ZN3atb5Probe10SaveTilingEPKhmRK{s}",
        f"_ZN3atb5Probe9SaveParamERK{s}{s2}",
        f"_ZN3atb5Probe23ReportOperationIOTensorEmRK{s}{s2}{vec}",
        f"_ZN3atb5Probe29ReportOperationSetupStatisticEmRK{s}{s2}",
        f"_ZN3atb5Probe31ReportOperationExecuteStatisticEmRK{s}{s2}",
        f"_ZN3atb5Probe20ReportKernelIOTensorEmRK{s}{s2}{vec}",
        f"_ZN3atb5Probe20ReportOverflowKernelERK{s}",
        f"_ZN3atb5Probe25IsSaveTensorInSpecificDirERK{s}",
        f"_ZN3atb5Probe20ReportOperationGraphERK{s}{s2}",
    })


def atb_helpers(abi: int) -> frozenset[str]:
    """ATB's real tensor-conversion helpers: defined by libatb.so, never by a probe."""
    s = _S[abi]
    return frozenset({
        f"_ZN3atb5Probe25AsdopsTensorToProbeTensorERKN3Mki6TensorERNS0_6TensorERK{s}",
        f"_ZN3atb5Probe22AtbTensorToProbeTensorERKNS_6TensorERNS0_6TensorERK{s}",
    })


def speed_hooks(abi: int) -> frozenset[str]:
    s, s2 = _S[abi], _S2[abi]
    return frozenset({
        f"_ZN9atb_speed10SpeedProbe21IsReportModelTopoInfoERK{s}",
        f"_ZN9atb_speed10SpeedProbe19ReportModelTopoInfoERK{s}{s2}",
    })


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def c_program(tmp_path: Path, main: str, sources: tuple[str, ...] = ()) -> Path:
    """`main` (C source text) compiled with the shim's mechanisms `sources` (file names
    in native/core/mechanisms), its headers and native/include on the include path;
    the executable."""
    mech = REPO / "native" / "core" / "mechanisms"
    src = tmp_path / "main.c"
    src.write_text(main)
    exe = tmp_path / "main"
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                    f"-I{REPO / 'native' / 'include'}", f"-I{mech}", str(src),
                    *(str(mech / s) for s in sources), "-o", str(exe), "-lpthread"],
                   check=True)
    return exe
