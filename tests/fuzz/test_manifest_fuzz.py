"""The short run of the crafted-manifest fuzzer in `make test` (the long one is
`make fuzz`): the same mutations and checks on a few inputs, a fixed seed."""

from __future__ import annotations

import pytest
from manifest_fuzz import READERS, run
from offline_helpers import need_real  # (on the path manifest_fuzz sets)

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

SHORT = 2 * len(READERS)


def test_crafted_manifests_are_refused_by_name_never_followed():
    need_real()
    tried, findings = run(SHORT, seed=1)
    assert tried == SHORT
    if findings:
        pytest.fail("\n".join(findings))
