"""Hostile servers on loopback (127.0.0.1 or ::1) for the `--scheduler` tests and
fuzzer: each connection gets a script of steps, such as bytes to send, a pause,
reading what the client sent, or closing. Importable as `loopback` from any test
module (tests/ is on sys.path)."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Sequence

# A step: ("send", bytes), ("read",) (up to 64 KiB, waiting at most 0.5 s),
# ("close",); the script's end leaves the connection open and silent.
Step = tuple

HTTP_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
                 b"\r\nok")


def dask_message(msg) -> bytes:
    """`msg` as Dask's TCP comm frames it (the bytes a real Dask peer sends)."""
    from distributed.comm.tcp import _add_frames_header
    from distributed.protocol import dumps

    frames, _, _ = _add_frames_header(dumps(msg))
    return b"".join(bytes(f) for f in frames)


def dask_handshake() -> bytes:
    return dask_message({"compression": None, "python": tuple(sys.version_info[:3]),
                         "pickle-protocol": 5})


class Server:
    """`with Server(steps, family) as s:` listens on a free loopback port
    (`s.address`: tcp://127.0.0.1:PORT or tcp://[::1]:PORT) and plays `steps`
    to every connection, until closed."""

    def __init__(self, steps: Sequence[Step], family: int = socket.AF_INET) -> None:
        self.steps = list(steps)
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        self.sock.bind((host, 0))
        self.sock.listen(16)
        port = self.sock.getsockname()[1]
        self.address = f"tcp://[{host}]:{port}" if family == socket.AF_INET6 else \
            f"tcp://{host}:{port}"
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._play, args=(conn,), daemon=True).start()

    def _play(self, conn: socket.socket) -> None:
        try:
            for step in self.steps:
                if step[0] == "send":
                    conn.sendall(step[1])
                elif step[0] == "read":
                    conn.settimeout(0.5)
                    try:
                        conn.recv(65536)
                    except TimeoutError:
                        pass
                    conn.settimeout(None)
                elif step[0] == "close":
                    conn.close()
                    return
        except OSError:  # the client left
            pass

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        self.sock.close()
        with self.lock:
            for c in self.conns:
                c.close()
            self.conns.clear()
        self.thread.join()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
