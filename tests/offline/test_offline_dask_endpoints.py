"""`compare --scheduler` with something that is not a Dask scheduler: one line
saying what is there (exit 2), within the connect timeout, never a traceback,
a hang or a compare. The servers are real, on loopback (127.0.0.1 and ::1)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from loopback import HTTP_RESPONSE, Server, dask_handshake, dask_message
from offline_helpers import run_cli
from offline_synth import small_model


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    base = tmp_path_factory.mktemp("endpoints")
    small_model(base / "g", rounds=1)
    small_model(base / "t", rounds=1, seed=1)
    return base


def compare(dumps, scheduler: str, *extra: str) -> tuple[int, str]:
    return run_cli("compare", "-gp", str(dumps / "g"), "-tp", str(dumps / "t"), "-o",
                   str(dumps / "r.csv"), "--scheduler", scheduler, *extra)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("msprobe-atb compare: error: "), err
    return lines[0]


@pytest.mark.parametrize("text", ["garbage", "http://127.0.0.1:8786", "tcp://[::1",
                                  "tcp://127.0.0.1:99999", "tcp://127.0.0.1:0",
                                  "tcp://127.0.0.1:port", "inproc://x", "", "tcp://a b:1",
                                  "tcp://127.0.0.1:8786/path", "\x00:1"])
def test_an_address_that_is_not_a_scheduler_address_is_one_line(dumps, text, capsys):
    rc, out = compare(dumps, text)
    line = one_line_error(capsys)
    assert rc == 2 and out == ""
    assert f"--scheduler {text!r}" in line and "give tcp://HOST:PORT" in line
    assert not (dumps / "r.csv").exists()


CLOSED = "the server there closed the connection without answering as a Dask scheduler"
# (what the server does, what the one line says)
SERVERS = {
    "http": ([("read",), ("send", HTTP_RESPONSE), ("close",)],
             "the server there is not a Dask scheduler"),
    "zeros": ([("send", b"\0" * 64)], "the server there is not a Dask scheduler"),
    "closes": ([("close",)], CLOSED),
    "partial-frame": ([("send", dask_handshake()[:11]), ("close",)], CLOSED),
    "dask-worker": ([("send", dask_handshake()), ("read",),
                     ("send", dask_message({"type": "Worker", "id": "w"}))],
                    "the server there is a Dask Worker, not a Dask scheduler"),
    "dask-nonsense": ([("send", dask_handshake()), ("read",), ("send", dask_message([1, 2]))],
                      "the server there is something else, not a Dask scheduler"),
}


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_server_that_is_not_a_scheduler_is_one_line(dumps, kind, family, capsys):
    steps, says = SERVERS[kind]
    with Server(steps, family) as srv:
        rc, out = compare(dumps, srv.address, "--connect-timeout", "30")
    line = one_line_error(capsys)
    assert rc == 2 and out == "" and not (dumps / "r.csv").exists()
    assert f"--scheduler {srv.address}: {says}" in line


def test_a_silent_server_is_given_up_on_after_the_connect_timeout(dumps):
    """It accepts and never answers: the compare process ends with one line
    naming the timeout (it used to wait for 420 s and more)."""
    with Server([]) as srv:
        r = subprocess.run([sys.executable, "-m", "msprobe_atb", "compare", "-gp",
                            str(dumps / "g"), "-tp", str(dumps / "t"), "-o",
                            str(dumps / "r.csv"), "--scheduler", srv.address,
                            "--connect-timeout", "1"],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"msprobe-atb compare: error: --scheduler {srv.address}: no answer within 1 s (a "
        "server there accepted the connection but did not answer as a Dask scheduler; "
        "--connect-timeout sets the wait)"]


def test_nothing_listening_is_one_line(dumps, capsys):
    with Server([]) as srv:
        address = srv.address
    rc, _ = compare(dumps, address, "--connect-timeout", "1")
    line = one_line_error(capsys)
    assert rc == 2 and f"--scheduler {address}: cannot reach a Dask scheduler there" in line
