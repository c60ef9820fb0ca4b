"""The stand-in service under the probe, as a bench drives it: `atbsim serve`
started with the shim preloaded, chat requests to it, and a stop as an
operator's (SIGTERM), after which the shim's exit drain runs."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import urllib.request
from pathlib import Path

from bench.common import ATBSIM, probe_env, stop_daemon

BODY = json.dumps({"messages": [{"role": "user", "content": "hello"}]}).encode()


class StandInService:
    """`with StandInService(out, config, args) as service:` serves on a free
    loopback port until service.stop() or the block's end, which also stops
    the dump's daemon."""

    def __init__(self, out: Path, config: Path, args: list[str]):
        self.out = out
        self.proc = subprocess.Popen([str(ATBSIM), "serve", "--port", "0", *args],
                                     env=probe_env(out, config), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.port = next((int(m.group(1)) for line in self.proc.stdout
                          if (m := re.search(r"Listening on 127\.0\.0\.1:(\d+)", line))), 0)
        if not self.port:
            self.stop()
            raise RuntimeError(f"atbsim serve exited ({self.proc.returncode}) before it listened")
        # what it prints later must not fill the pipe and stall it
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def request(self) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                     data=BODY)
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()

    def stop(self) -> int:
        """SIGTERM, then its exit; its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait()

    def __enter__(self) -> StandInService:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        stop_daemon(self.out)
