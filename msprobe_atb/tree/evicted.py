"""Which complete rounds the tree builder has let go of, in memory that does not
grow with the number of rounds.

A round whose marker is written holds nothing the builder needs: its rows are
in statistic.csv, its counts in ROUND_COMPLETE.json. The builder drops it and
notes here that it did, so that a later record of that round (a request that
reuses the round number) reads the round back from disk instead of starting it
afresh over the files. Rounds complete nearly in order, so each process's
rounds are kept as runs of consecutive numbers: a service running 100,000
rounds keeps a few runs, not 100,000 entries.
"""

from __future__ import annotations

import bisect

from msprobe_atb.tree.records import ProcKey, RoundKey


class EvictedRounds:
    def __init__(self) -> None:
        # "{dev}_{pid}" -> the process whose rounds they are -> sorted, disjoint
        # runs [first, last] of round numbers
        self._runs: dict[str, dict[ProcKey, list[list[int]]]] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, key: RoundKey, owner: ProcKey) -> bool:
        """Notes a round as dropped; False if its number is not a plain count
        (the builder then keeps it)."""
        if not key[1].isdigit():
            return False
        n = int(key[1])
        runs = self._runs.setdefault(key[0], {}).setdefault(owner, [])
        i = bisect.bisect_right(runs, [n, float("inf")])
        if i and runs[i - 1][1] >= n:
            return True  # already there
        self._n += 1
        joins_left = i > 0 and runs[i - 1][1] == n - 1
        joins_right = i < len(runs) and runs[i][0] == n + 1
        if joins_left and joins_right:
            runs[i - 1][1] = runs.pop(i)[1]
        elif joins_left:
            runs[i - 1][1] = n
        elif joins_right:
            runs[i][0] = n
        else:
            runs.insert(i, [n, n])
        return True

    def take(self, key: RoundKey) -> ProcKey | None:
        """The process a dropped round belonged to, forgetting the round (it is
        back in the builder), or None if it was never dropped."""
        if not key[1].isdigit():
            return None
        n = int(key[1])
        for owner, runs in self._runs.get(key[0], {}).items():
            i = bisect.bisect_right(runs, [n, float("inf")]) - 1
            if i < 0 or runs[i][1] < n:
                continue
            first, last = runs[i]
            pieces = [r for r in ([first, n - 1], [n + 1, last]) if r[0] <= r[1]]
            runs[i:i + 1] = pieces
            self._n -= 1
            return owner
        return None
