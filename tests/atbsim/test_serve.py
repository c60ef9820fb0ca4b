"""`atbsim serve`: a front process plus one worker process per device, an
OpenAI-style HTTP API, and a clean stop on SIGTERM/SIGINT with no process left."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


class Service:
    """A running `atbsim serve --port 0`; stdout is read on a thread."""

    def __init__(self, exe: Path, args: list[str], env: dict[str, str], cwd: Path):
        # stderr goes to a file: nobody drains a pipe while the service runs.
        self.stderr_path = cwd / f"serve-{id(self)}.err"
        with self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [str(exe), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                stderr=err, text=True, env=env, cwd=cwd)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.port = 0
        self.worker_pids: list[int] = []

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is None and time.monotonic() < deadline:
                    continue
                pytest.fail(f"no 'Daemon start success!' (exit {self.proc.poll()}); stdout "
                            f"{self.stdout}, stderr {self.stderr_path.read_text()[-2000:]}")
            self.stdout.append(line)
            if line.startswith("Listening on 127.0.0.1:"):
                self.port = int(line.rsplit(":", 1)[1])
            if line == "Daemon start success!":
                assert self.port > 0
                return

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def chat(self, text: str, max_tokens: int) -> dict:
        status, reply = self.request("POST", "/v1/chat/completions", {
            "model": "llama-sim", "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens})
        assert status == 200, reply
        self.worker_pids = reply["worker_pids"]
        return reply

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        for pid in [self.proc.pid, *self.worker_pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)


@pytest.fixture
def serve(atbsim_paths, clean_env, tmp_path):
    started: list[Service] = []

    def start(abi: int, *args: str, env: dict[str, str] | None = None) -> Service:
        exe = atbsim_paths.home(abi) / "bin" / "atbsim"
        assert exe.exists(), f"{exe} missing: run `make -j2 native`"
        svc = Service(exe, list(args), {**clean_env, **(env or {})}, tmp_path)
        started.append(svc)
        svc.wait_ready()
        return svc

    yield start
    for svc in started:
        if svc.proc.poll() is None:
            svc.kill()


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_two_workers_answer_and_stop_cleanly(abi, atbsim_paths, serve, sig):
    svc = serve(abi, "--devices", "2")
    assert svc.request("GET", "/health") == (200, {"status": "ok", "workers": 2})
    reply = svc.chat("hello", 5)
    assert reply["object"] == "chat.completion" and reply["model"] == "llama-sim"
    assert reply["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    assert len(reply["tokens"]) == 5
    assert isinstance(reply["choices"][0]["message"]["content"], str)
    pids = reply["worker_pids"]
    assert len(set(pids)) == 2 and svc.proc.pid not in pids
    assert all(parent_of(p) == svc.proc.pid for p in pids)
    # The same prompt through `atbsim run` gives the same tokens.
    run = subprocess.run([str(atbsim_paths.home(abi) / "bin" / "atbsim"), "run", "--prompt",
                          "hello", "--decode-steps", "4"], capture_output=True, text=True,
                         timeout=60)
    assert run.stdout.split("tokens: ")[1].split() == [str(t) for t in reply["tokens"]]
    assert svc.stop(sig) == 0
    assert all(gone(p) for p in pids)


def test_bad_requests_get_clear_errors(atbsim_paths, serve):
    svc = serve(0, "--devices", "1")
    status, body = svc.request("POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "not JSON" in body["error"]["message"]
    status, body = svc.request("POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})
    assert status == 400 and "max_tokens" in body["error"]["message"]
    status, body = svc.request("POST", "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert status == 400 and "messages[0].content" in body["error"]["message"]
    assert svc.request("GET", "/v1/chat/completions")[0] == 405
    assert svc.request("GET", "/nowhere")[0] == 404
    # Still serving after the errors; default max_tokens = --decode-steps + 1.
    assert len(svc.chat("ok", 3)["tokens"]) == 3
    status, body = svc.request("POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "ok"}]})
    assert status == 200 and len(body["tokens"]) == 5
    assert svc.stop() == 0


def test_workers_run_on_their_own_device_under_a_probe(abi, atbsim_paths, serve, tmp_path):
    trace = tmp_path / "trace.jsonl"
    svc = serve(abi, "--devices", "2", env={
        "LD_PRELOAD": str(atbsim_paths.recording_probe(abi)),
        "RECPROBE_LOG": str(tmp_path / "calls.jsonl"), "RECPROBE_ANSWERS": "all-true",
        "ATBSIM_SAVE_TRACE": str(trace)})
    svc.chat("one", 2)
    svc.chat("two", 2)
    pids = svc.worker_pids
    assert svc.stop() == 0
    roots = {json.loads(line)["path"].split("/")[0] for line in trace.read_text().splitlines()}
    assert roots == {f"0_{pids[0]}", f"1_{pids[1]}"}
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    topo = [c for c in calls if c["fn"] == "ReportModelTopoInfo"]
    # Each worker reports each model once per request (2 requests x 2 models x 2 workers).
    assert len(topo) == 8 and {c["tid"] for c in topo} == set(pids)


def test_a_dead_worker_stops_the_service_without_orphans(atbsim_paths, serve):
    svc = serve(1, "--devices", "2")
    pids = svc.chat("x", 1)["worker_pids"]
    os.kill(pids[0], signal.SIGKILL)
    assert svc.proc.wait(timeout=30) == 1
    assert "exited unexpectedly" in svc.stderr_path.read_text()
    assert all(gone(p) for p in pids)
