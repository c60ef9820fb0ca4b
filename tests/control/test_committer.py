"""The committer: jobs run in order on its thread, their outcomes applied on the
caller's, and a full committer holds the caller back instead of growing."""

from __future__ import annotations

import threading

import pytest

from msprobe_atb.tree.committer import Committer


class Gate:
    """Jobs that wait until let go, and the order they ran and were applied in."""

    def __init__(self):
        self.open = threading.Event()
        self.ran: list[int] = []
        self.applied: list[tuple[int, object]] = []

    def job(self, i: int, fail: BaseException | None = None):
        def work():
            assert self.open.wait(30)
            self.ran.append(i)
            if fail is not None:
                raise fail
            return i * 10

        return work, lambda outcome: self.applied.append((i, outcome))


def test_jobs_run_in_order_and_are_applied_on_the_callers_thread():
    c, g = Committer(), Gate()
    caller = threading.get_ident()
    applied_on = []
    for i in range(5):
        work, apply = g.job(i, OSError(5, "EIO") if i == 2 else None)
        c.submit(work, lambda o, apply=apply: (applied_on.append(threading.get_ident()),
                                                apply(o)))
    c.collect()  # nothing finished yet: returns at once
    assert g.applied == [] and c.pending() == 5
    g.open.set()
    c.collect(block=True)
    assert g.ran == [0, 1, 2, 3, 4]
    assert [i for i, _ in g.applied] == [0, 1, 2, 3, 4]
    assert isinstance(g.applied[2][1], OSError) and g.applied[3][1] == 30
    assert set(applied_on) == {caller} and c.pending() == 0


@pytest.mark.parametrize("limit", ["jobs", "bytes"])
def test_a_full_committer_holds_the_caller_back(limit):
    c = Committer(max_jobs=3) if limit == "jobs" else Committer(max_bytes=100)
    g = Gate()
    keeps = 0 if limit == "jobs" else 40
    for i in range(3 if limit == "jobs" else 2):
        c.submit(*g.job(i), keeps)
    submitted = threading.Event()

    def one_more():
        c.submit(*g.job(9), keeps)
        submitted.set()

    t = threading.Thread(target=one_more)
    t.start()
    assert not submitted.wait(0.5)  # held back while the jobs wait for the disk
    g.open.set()
    assert submitted.wait(30)
    t.join()
    assert g.applied[0][0] == 0  # the oldest was collected to make room


def test_a_crash_in_a_job_ends_the_thread_and_reaches_the_caller():
    class Crash(BaseException):
        pass

    c, g = Committer(), Gate()
    c.submit(*g.job(0, Crash()))
    c.submit(*g.job(1))
    g.open.set()
    with pytest.raises(Crash):
        c.collect(block=True)
    assert g.ran == [0]  # nothing ran after it


def test_on_done_is_called_after_each_job_with_it_ready_to_collect():
    # the daemon's loop wakes on it and collects at once (service.py)
    seen: list[bool] = []
    done = threading.Semaphore(0)
    c: Committer

    def on_done():
        seen.append(c.ready())
        done.release()

    c, g = Committer(on_done=on_done), Gate()
    g.open.set()
    for i in range(3):
        c.submit(*g.job(i))
    for _ in range(3):
        assert done.acquire(timeout=30)
    assert seen == [True, True, True] and g.ran == [0, 1, 2]
    c.collect()
    assert [i for i, _ in g.applied] == [0, 1, 2]
