"""Symlinks planted in the dump tree before a run (by anyone who can write the
output dir) lead nowhere: nothing is written outside <output>/atb_dump_data, the
host runs normally and the tensors that could not be written are counted lost."""

from __future__ import annotations

import json
import subprocess

from robust_helpers import DUMP_ALL, SMALL, atbsim_cmd, probe_env, records, status, wait_daemon_gone


def _files(d) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir())


def _run_with_links(tmp_path, links: dict[str, str]):
    """Runs the small model; `links` maps paths under atb_dump_data (with {pid}
    for the host's pid) to directories under `elsewhere`, planted just before."""
    out = tmp_path / "out dir with spaces"
    root = out / "atb_dump_data"
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    plant = []
    for link, target in links.items():
        (elsewhere / target).mkdir(parents=True)
        link = link.replace("{pid}", "$$")
        plant.append(f'mkdir -p "$(dirname "{root}/{link}")" && '
                     f'ln -s "{elsewhere / target}" "{root}/{link}"')
    script = " && ".join(plant + ['exec "$@"'])
    r = subprocess.run(["bash", "-c", script, "bash", *atbsim_cmd(*SMALL)],
                       env=probe_env(out, config), capture_output=True, text=True, timeout=120)
    wait_daemon_gone(out)
    return out, elsewhere, r


def test_planted_data_and_info_links(tmp_path):
    out, elsewhere, r = _run_with_links(tmp_path, {
        "data/0_{pid}": "data", "info/layer/0_{pid}": "layer", "info/model/0_{pid}": "model"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tokens" in r.stdout
    assert _files(elsewhere) == []
    (proc,) = status(out)["processes"]
    assert proc["tensors_written"] == 0 and proc["errors"] >= proc["tensors_selected"] > 0
    lost = [x for x in records(out / "atb_dump_data") if x["k"] == "tensor"]
    assert lost and all(x["file"] == "lost" and "cannot create directory" in x["note"]
                        for x in lost)


def test_planted_records_link(tmp_path):
    out, elsewhere, r = _run_with_links(tmp_path, {".probe/records": "records"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert _files(elsewhere) == []
