"""The commands a user types often (and the load script's config check)
start without the heavy libraries the offline tools need. The times themselves are
figures of `make bench` (bench/startup.py); this holds what they depend on."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from e2e_helpers import require_artifacts
from testkit import atb_home, atbsim_bin

HEAVY = ("numpy", "polars", "ml_dtypes", "pyarrow", "duckdb", "plotly", "dask", "distributed",
         "openpyxl", "xlsxwriter", "tqdm", "asyncio", "ssl")
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.M)


def imported(*args: str, env: dict[str, str]) -> set[str]:
    """The top-level packages a fresh `python -m msprobe_atb ARGS` imports."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "msprobe_atb", *args],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    return {name.split(".")[0] for name in IMPORTED.findall(p.stderr)}


def test_quick_commands_do_not_import_the_offline_libraries(tmp_path, clean_env):
    require_artifacts(1)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "all", "dump_enable": True, "exec_range": "0,1"}))
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "run", "--output", str(tmp_path),
                        "--config", str(config), "--", str(atbsim_bin(1)), "run",
                        "--layers", "2", "--decode-steps", "1"],
                       env=dict(clean_env, ATB_HOME_PATH=str(atb_home(1))),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    heavy = {}
    for args in (["--version"], ["--help"], ["check", str(config)], ["status", str(tmp_path)],
                 ["wait", str(tmp_path)]):
        heavy[" ".join(args[:1])] = sorted(imported(*args, env=clean_env) & set(HEAVY))
    assert heavy == dict.fromkeys(heavy, []), heavy


def test_the_offline_package_still_offers_its_names_on_first_use(clean_env):
    """The names `msprobe_atb.offline` exports arrive when used, not at import."""
    code = ("import sys, msprobe_atb.offline as o; assert 'numpy' not in sys.modules; "
            "print(o.load_bin.__module__, o.open_dump.__module__, o.compare_dumps.__module__, "
            "sorted(o.__all__) == sorted(n for n in o.__all__ if hasattr(o, n)))")
    p = subprocess.run([sys.executable, "-c", code], env=clean_env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["msprobe_atb.offline.read.binfile",
                                "msprobe_atb.offline.read.table",
                                "msprobe_atb.offline.compare.dumps", "True"]
