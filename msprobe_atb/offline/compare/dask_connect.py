"""Reaching the Dask scheduler of `compare --scheduler`, or saying in one line why not.

Dask's own client trusts what it connects to: an address that is not one raises
ValueError, and a server that is not a scheduler is read as Dask frames (an
HTTP server's first bytes ask for exabytes, zeros break the frame parser) or,
silent, is waited for without end. So before a Client is made, the address is
checked here, and one connection within `timeout` seconds (connect, Dask's
handshake, and an `identity` request) must be answered by a scheduler.
"""

from __future__ import annotations

import contextlib
import logging
import re

from .engine_rule import CONNECT_TIMEOUT_S

_EXAMPLE = "tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786 (the address `dask scheduler` prints)"


class ClusterError(RuntimeError):
    """The cluster cannot be used; the message says why and what to do."""


class _Unreachable(Exception):
    """No connection could be made (refused, no route, unknown host)."""


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "it announced a message too large to be one"
    text = re.sub(r"\s+", " ", str(exc)).strip()
    text = text if len(text) <= 160 else text[:157] + "..."
    kind = type(exc)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    return f"{name}: {text}" if text else name


def scheduler_address(text: str) -> str:
    """`tcp://HOST:PORT` (or `HOST:PORT`) as Dask spells it; ClusterError otherwise."""
    from distributed.comm.addressing import parse_address, parse_host_port, unparse_host_port

    bad = ClusterError(f"--scheduler {text!r} is not a Dask scheduler address; give {_EXAMPLE}")
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise bad
    try:
        scheme, loc = parse_address(text)
        host, port = parse_host_port(loc)
    except (ValueError, TypeError):
        raise bad from None
    if scheme != "tcp":
        raise ClusterError(f"--scheduler {text!r}: {scheme}:// is not a Dask scheduler's "
                           f"scheme; give {_EXAMPLE}")
    if not host or not isinstance(port, int) or not 0 < port < 65536:
        raise bad
    return "tcp://" + unparse_host_port(host, port)


async def _identity(address: str, seen: dict) -> dict:
    """Connect, exchange Dask's handshake, ask `identity`. Done here, not by
    distributed.comm.connect, so the connection is closed whatever the peer sent
    (Dask leaves it to the garbage collector when the handshake fails)."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address
    from distributed.comm.core import CommClosedError

    scheme, loc = parse_address(address)
    try:
        comm = await registry.get_backend(scheme).get_connector().connect(loc)
    except Exception as exc:  # Dask wraps the socket's error: say the socket's
        cause = exc.__cause__ or exc
        if isinstance(cause, CommClosedError):  # accepted, and closed at once
            raise
        raise _Unreachable(_one_line(cause)) from None
    seen["connected"] = True
    try:
        await comm.write(comm.handshake_info())
        await comm.read()  # the peer's handshake
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


@contextlib.contextmanager
def _quiet_dask():
    """Dask logs what it could not parse at CRITICAL, with a traceback; here that
    is the answer, said in one line instead."""
    loggers = [logging.getLogger(n) for n in ("distributed.protocol.core",
                                              "distributed.comm.tcp", "distributed.comm.core")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def reach_scheduler(text: str, timeout: float = CONNECT_TIMEOUT_S) -> str:
    """The scheduler's address once one answered there within `timeout` seconds;
    ClusterError (one line: what answered, or that nothing did) otherwise."""
    import asyncio  # here: every compare imports this module, few reach a scheduler

    from distributed.comm.core import CommClosedError

    address = scheduler_address(text)
    where = f"--scheduler {address}"
    start_one = ("start one with `dask scheduler` (and workers with `dask worker`), or drop "
                 "--scheduler to compare on this machine")
    seen: dict = {}
    try:
        with _quiet_dask():
            reply = asyncio.run(asyncio.wait_for(_identity(address, seen), timeout))
    except (asyncio.TimeoutError, TimeoutError):
        what = ("a server there accepted the connection but did not answer as a Dask "
                "scheduler" if seen else "no connection: is the host up and the port right?")
        raise ClusterError(f"{where}: no answer within {timeout:g} s ({what}; "
                           "--connect-timeout sets the wait)") from None
    except CommClosedError:
        raise ClusterError(f"{where}: the server there closed the connection without "
                           f"answering as a Dask scheduler; {start_one}") from None
    except _Unreachable as exc:
        raise ClusterError(f"{where}: cannot reach a Dask scheduler there ({exc}); "
                           f"{start_one}") from None
    except Exception as exc:  # what the server sent is not Dask's protocol
        raise ClusterError(f"{where}: the server there is not a Dask scheduler (what it sent "
                           f"is not Dask's protocol: {_one_line(exc)})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else None
        what = f"a Dask {kind}" if isinstance(kind, str) and kind else "something else"
        raise ClusterError(f"{where}: the server there is {what}, not a Dask scheduler; give "
                           "the address the scheduler prints (`Scheduler at: tcp://...`)")
    return address
