"""The hostile-scheduler fuzzer: what `compare --scheduler` does first (check the
address, then one connection that a Dask scheduler must answer within the
connect timeout) against Hypothesis-made inputs:
* address strings: random text, and near misses of tcp://HOST:PORT (checked,
  never connected to: only our own servers are);
* servers on loopback (127.0.0.1 or ::1) playing a script per connection:
  random bytes, HTTP, zeros, Dask frame headers announcing any size, Dask's
  real handshake cut anywhere, well-framed Dask messages that are not a
  scheduler's answer, pauses for the client's bytes, silence, closing.
A finding is a traceback (any exception but the one-line ClusterError), an
error of more than one line, a hang (no answer TIMEOUT_S + GRACE_S after the
start), or a pass (a server taken for a scheduler).
`make fuzz` runs it long (`python tests/fuzz/scheduler_fuzz.py`), `make test`
briefly (test_scheduler_fuzz.py); prints "fuzz hostile-scheduler: N inputs
tried, K findings"."""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]
from loopback import HTTP_RESPONSE, Server, dask_handshake, dask_message  # noqa: E402

from msprobe_atb.offline.compare.dask_connect import (  # noqa: E402
    ClusterError,
    reach_scheduler,
    scheduler_address,
)

NAME = "hostile-scheduler"
TIMEOUT_S = 0.25  # the connect timeout given to each try
GRACE_S = 15.0  # beyond TIMEOUT_S: a hang (generous: a loaded 2-core machine)


class Finding(AssertionError):
    pass


def _frame_header(size: int) -> bytes:
    return struct.pack("<Q", size)


# A well-framed Dask message that is not a scheduler's identity.
_not_scheduler = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=4),
    max_leaves=10,
).filter(lambda m: not (isinstance(m, dict) and m.get("type") == "Scheduler"))

_sends = st.one_of(
    st.binary(min_size=1, max_size=600),
    st.sampled_from([HTTP_RESPONSE, b"\0" * 64, b"\xff" * 64, b"SSH-2.0-OpenSSH_9.6\r\n",
                     b"220 smtp ready\r\n", b"+PONG\r\n"]),
    st.builds(lambda n, tail: _frame_header(n) + tail, st.integers(0, 2**64 - 1),
              st.binary(max_size=64)),
    st.builds(lambda k: dask_handshake()[:k], st.integers(1, 200)),
    st.just(dask_handshake()),
    st.builds(dask_message, _not_scheduler),
)
_steps = st.lists(st.one_of(st.tuples(st.just("send"), _sends), st.just(("read",))),
                  max_size=5)
servers = st.tuples(_steps, st.booleans(),
                    st.sampled_from([socket.AF_INET, socket.AF_INET6]))

_hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "::1", "[::1", "::1]", "",
                          "10.0.0.5", "host name", "h\x00st", "[fe80::1%eth0]", "ä.example"])
_ports = st.one_of(st.integers(-5, 70000).map(str), st.sampled_from(["", "port", "0x10",
                                                                     "8786/x", " 8786"]))
addresses = st.one_of(
    st.text(max_size=40),
    st.builds(lambda s, h, p: f"{s}{h}:{p}",
              st.sampled_from(["", "tcp://", "http://", "tls://", "inproc://", "ucx://",
                               "ws://", "TCP://", "tcp:/", "tcp:///", "://"]), _hosts, _ports),
)


def _bounded(fn, *args):
    """fn(*args) in a thread; (returned value, exception, finished in time)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # judged by the caller
            box["exc"] = exc

    th = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    th.start()
    th.join(TIMEOUT_S + GRACE_S)
    if th.is_alive():
        raise Finding(f"hang: no answer {time.monotonic() - start:.0f} s after the start "
                      f"(connect timeout {TIMEOUT_S} s)")
    return box.get("value"), box.get("exc")


def _judge(what: str, value, exc) -> None:
    if exc is None:
        raise Finding(f"a pass: {what} was taken for a scheduler ({value!r})")
    if not isinstance(exc, ClusterError):
        raise Finding(f"a traceback on {what}: "
                      + "".join(traceback.format_exception(exc)))
    if "\n" in str(exc):
        raise Finding(f"not one line on {what}: {exc}")


def try_address(text: str) -> None:
    value, exc = _bounded(scheduler_address, text)
    if exc is None:
        if not value.startswith("tcp://"):
            raise Finding(f"address {text!r} taken as {value!r}")
        return  # a well-formed address: connecting to it is the servers' part
    _judge(f"address {text!r}", value, exc)


def try_server(steps: list, close: bool, family: int) -> None:
    script = steps + ([("close",)] if close else [])
    with Server(script, family) as srv:
        value, exc = _bounded(reach_scheduler, srv.address, TIMEOUT_S)
    _judge(f"a server playing {script!r}", value, exc)


def run(examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    """Tries `examples` inputs; returns (inputs tried, findings)."""
    tried = 0

    @settings(max_examples=examples, database=None, deadline=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=True)
    @given(st.one_of(st.tuples(st.just("address"), addresses),
                     st.tuples(st.just("server"), servers)))
    def check(case) -> None:
        nonlocal tried
        tried += 1
        kind, data = case
        if kind == "address":
            try_address(data)
        else:
            try_server(*data)

    try:
        check()
        findings: list[BaseException] = []
    except BaseExceptionGroup as group:  # several distinct findings  # noqa: F821
        findings = list(group.exceptions)
    except Exception as exc:  # one finding, shrunk to its smallest input
        findings = [exc]
    return tried, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=2000, help="inputs to try")
    args = ap.parse_args()
    tried, findings = run(args.examples)
    for exc in findings:
        traceback.print_exception(exc)
    print(f"fuzz {NAME}: {tried} inputs tried, {len(findings)} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
