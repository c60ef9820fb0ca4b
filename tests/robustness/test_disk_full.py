"""A full disk under the output dir: the host finishes normally, what could not be
written is counted as lost, nothing partial is left for a reader, and once there
is room again `rebuild` gives a tree whose every row points at a complete file."""

from __future__ import annotations

import json
import subprocess

import pytest
from robust_helpers import (
    DUMP_ALL,
    SMALL,
    assert_readable_tree,
    cli,
    csv_rows,
    fill,
    pretouch_block,
    rebuild,
    records,
    run_atbsim,
    status,
    status_now,
    wait_daemon_gone,
)
from testkit import wait_until

FILES = ("bin", "linked", "stub")  # records whose tensor has a file
# The small model dumps ~1500 tensors, about 6 MiB on a tmpfs (a page per file):
# a 2 MiB file system fills up in the middle of the run.
FS_KIB = 2048


def lost_params(recs: list[dict]) -> int:
    """op_param.json files not written, per the record log."""
    (ex,) = [x for x in recs if x["k"] == "exit"]
    return (sum(x["k"] == "param" and x["file"] == "lost" for x in recs)
            + ex.get("params_unrecorded", 0))


@pytest.fixture(scope="module")
def full_run(module_fs):
    """One run of the small model, dumping everything, into a disk that fills up."""
    fs = module_fs(FS_KIB)
    out = fs / "out"
    config = fs.parent / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    pretouch_block(out)
    r = run_atbsim(out, config, *SMALL)
    wait_daemon_gone(out)
    return fs, out, r, status(out)


def test_host_finishes_and_counts_the_loss(full_run):
    _, out, r, st = full_run
    assert r.returncode == 0, r.stderr[-3000:]
    assert "tokens" in r.stdout  # the model ran to the end
    assert "No space left on device" in r.stderr
    (proc,) = st["processes"]
    assert proc["exited"] and not proc["alive"]
    assert proc["errors"] > 0, "a full disk must be counted as lost tensors"
    assert proc["queue_depth"] == 0
    assert proc["tensors_selected"] <= (proc["tensors_written"] + proc["errors"]
                                        + proc["drops"])
    bins = list((out / "atb_dump_data" / "data").rglob("*.bin"))
    assert 0 < len(bins) < proc["tensors_selected"]
    # Whatever the daemon managed to write on the full disk is consistent already.
    assert_readable_tree(out / "atb_dump_data")


def test_status_balances_after_a_full_disk(full_run):
    """Every selected tensor ends written, dropped or failed (a lost op_param.json
    is no tensor and does not count)."""
    _, _, _, st = full_run
    (proc,) = st["processes"]
    assert proc["tensors_selected"] == (proc["tensors_written"] + proc["errors"]
                                        + proc["drops"])
    assert st["all_written"]
    # the op_param.json files it lost are said on their own
    assert f"LOST: {proc['params_lost']} op_param.json files not written" in \
        cli("status", str(full_run[1])).stdout


def test_every_lost_tensor_is_in_the_record_log(full_run):
    _, out, _, st = full_run
    (proc,) = st["processes"]
    recs = records(out / "atb_dump_data")
    # One by one while the log's reserve lasts; past it, per round in the exit
    # record (kept room for in the reserve's floor).
    (ex,) = [x for x in recs if x["k"] == "exit"]
    lost = sum(x["k"] == "tensor" and x["file"] == "lost" for x in recs)
    unrecorded = sum(ex["unrecorded"].values())
    assert lost + unrecorded == proc["errors"] + proc["drops"]
    # a file is written when its record is: no .bin that no row will ever name
    root = out / "atb_dump_data"
    named = {x["path"] for x in recs if x["k"] == "tensor" and x["file"] in FILES}
    on_disk = {str(p.relative_to(root / "data")) for p in (root / "data").rglob("*.bin")}
    assert on_disk == named
    assert proc["tensors_written"] == len(named)
    # stats, on the tree the full disk left, counts as the record log does
    s = json.loads(cli("stats", str(out), "--json").stdout)
    assert s["lost"] == lost + unrecorded
    # op_param.json files too: replay needs them, and a lost one was never counted
    params = lost_params(recs)
    assert params == proc["params_lost"] > 0 and s["params_lost"] == params
    assert f"LOST: {params} op_param.json files were not written (record logs)" in \
        cli("stats", str(out)).stdout
    assert s["record_logs"]["tensors"] == sum(x["k"] == "tensor" for x in recs)
    # and so does stats of several dumps (ranks side by side), per dump
    r = cli("stats", str(out), str(out))
    assert r.stdout.count("INCOMPLETE: ") == 2 and "could not be checked" in r.stdout, r.stdout
    s = json.loads(cli("stats", str(out), str(out), "--json").stdout)
    assert [d["lost"] for d in s["losses"]] == [lost + unrecorded] * 2
    # compare said "No divergent tensor: all 213 compared tensors are within tolerance",
    # exit 0: the lost tensors are in neither table, so no pair spoke of them
    r = cli("compare", "-gp", str(out), "-tp", str(out), "-o", str(out.parent.parent / "c.csv"))
    assert r.returncode == 1, r.stdout
    assert "NOT A PASS: tensors the probe selected are missing" in r.stdout
    assert r.stdout.count("INCOMPLETE: ") == 2 and "the comparison is incomplete" in r.stdout
    # and the report, whose plots cannot show what is missing
    html_out = out.parent.parent / "r.html"
    r = cli("report", str(out), "-o", str(html_out), "--json")
    assert json.loads(r.stdout)["lost"] == lost + unrecorded
    page = html_out.read_text()
    assert "INCOMPLETE: " in page
    # no all-clear over tensors it never read: it said "No tensor holds NaN or Inf."
    assert "could not be checked" in page and "No NaN/Inf in any tensor" not in page


def test_query_and_status_say_what_the_full_disk_kept_out(full_run):
    """query once answered from the manifest's rows alone, though the record
    logs held more and tensors were lost; status said the open rounds would be
    marked once their process exited, after it had."""
    _, out, _, st = full_run
    recs = records(out / "atb_dump_data")
    r = cli("query", str(out), "SELECT count(*) AS n FROM tensors", "--format", "csv")
    assert "INCOMPLETE: " in r.stderr and "`msprobe-atb rebuild`" in r.stderr, r.stderr
    if r.returncode == 0:  # some manifest rows made it before the disk filled
        n = sum(x["k"] == "tensor" for x in recs)
        assert f"the record logs hold {n} tensor records" in r.stderr, r.stderr
    else:  # none did: the error says why, not "make one with `msprobe-atb index`"
        assert r.returncode == 2 and "no manifest" in r.stderr and "index" not in r.stderr
    rounds = st["rounds"]
    assert rounds["open_ended"] == rounds["total"] - rounds["complete"] > 0, rounds
    text = cli("status", str(out)).stdout
    assert "marked once its process" not in text, text
    assert (f"{rounds['open_ended']} of processes that have ended still open: their files or "
            "markers could not be written (No space left on device; NOT WRITTEN below)") in text


def test_rebuild_once_there_is_room_again(full_run):
    fs, out, _, st = full_run
    subprocess.run(["mount", "-o", f"remount,size={FS_KIB * 8}k", str(fs)], check=True)
    rebuild(out)
    root = out / "atb_dump_data"
    rows = assert_readable_tree(root)
    recs = [x for x in records(root) if x["k"] == "tensor"]
    assert rows == len(recs)
    (proc,) = st["processes"]
    assert sum(x["file"] in ("bin", "stub") for x in recs) <= proc["tensors_written"]
    for x in recs:
        if x["file"] == "lost":
            assert "No space left on device" in x["note"], x
    # Once the tree can be written, its markers and CSV rows agree with status:
    # a row per lost record, and per round the tensors whose record found no room.
    lost = sum(x["file"] == "lost" for x in recs)
    (ex,) = [x for x in records(root) if x["k"] == "exit"]
    markers = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/ROUND_COMPLETE.json")]
    assert sum(m["lost"] for m in markers) == proc["errors"] + proc["drops"]
    assert sum(m.get("lost_without_row", 0) for m in markers) == sum(ex["unrecorded"].values())
    assert sum(m.get("params_lost", 0) for m in markers) == lost_params(records(root)) > 0
    assert sum(e["Data Status"] == "lost" for _, _, e in csv_rows(root)) == lost
    # The offline tools read a dump with lost rows (their files do not exist), and
    # compare says it is not a pass: the lost tensors could not be compared (exit 1,
    # or 3 when the disk filled so early that too few pairs are left to call the
    # comparison complete: how much fits before it fills depends on timing).
    for args, rcs in ((("stats", str(out)), (0,)),
                      (("compare", "-gp", str(out), "-tp", str(out), "-o",
                        str(fs.parent / "cmp.csv")), (1, 3))):
        r = cli(*args)
        assert r.returncode in rcs and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
    assert "LOST: " in r.stdout and "NOT A PASS" in r.stdout
    r = cli("stats", str(out))
    assert "op_param.json files were not written (round markers)" in r.stdout, r.stdout
    # query's answer does not hold the lost tensors' data: it says so
    r = cli("query", str(out), "SELECT count(*) AS n FROM tensors")
    assert r.returncode == 0 and (f"LOST: {proc['errors'] + proc['drops']} selected tensors "
                                  "were not written (round markers)") in r.stderr, r.stderr
    # unload stops the control plane: it said "the dump ... is complete" of this dump
    config = fs.parent / "config.json"
    assert cli("daemon", "--output", str(out), "--config", str(config)).returncode == 0
    wait_until(lambda: status_now(out)["daemon"]["alive"], what="the control plane")
    r = cli("daemon", "--stop", "--output", str(out))
    assert "finished; the dump in" in r.stderr and "is NOT complete" in r.stderr, r.stderr
    assert f"LOST {proc['errors'] + proc['drops']}" in r.stderr, r.stderr


def test_attach_on_a_full_disk_does_not_kill_the_host(tmp_path, small_fs):
    fs = small_fs(512)
    out = fs / "out"
    out.mkdir()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    fill(fs)
    r = run_atbsim(out, config, *SMALL, MSPROBE_ATB_ATTACH_WAIT_MS="500")
    assert r.returncode == 0, f"host died with {r.returncode}: {r.stderr[-2000:]}"
    assert "tokens" in r.stdout


def test_read_only_output_dir(tmp_path, small_fs):
    fs = small_fs(1024)
    out = fs / "out"
    out.mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    r = run_atbsim(out, config, *SMALL, MSPROBE_ATB_ATTACH_WAIT_MS="300")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tokens" in r.stdout
    assert "Read-only file system" in r.stderr and "will not dump" in r.stderr, r.stderr
    assert [p.name for p in fs.iterdir()] == ["out"] and not any(out.iterdir())


def test_no_room_even_for_the_exit_record(tmp_path, small_fs):
    """A disk full from the start: the record log gets no record, not even the exit
    record. The control block keeps the counts; once there is room, the round
    markers and `stats` count every selected tensor as lost, as `status` does."""
    fs = small_fs(1024)
    out = fs / "out"
    pretouch_block(out)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    # the control plane is up and has published the config before the disk fills
    assert cli("daemon", "--output", str(out), "--config", str(config)).returncode == 0
    wait_until(lambda: status_now(out)["published"], what="the daemon's first publish")
    filler = fill(fs)
    r = run_atbsim(out, config, *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    (proc,) = status(out)["processes"]
    lost = proc["errors"] + proc["drops"]
    assert lost == proc["tensors_selected"] > 0
    filler.unlink()
    rebuild(out)
    root = out / "atb_dump_data"
    markers = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/ROUND_COMPLETE.json")]
    assert sum(m["lost"] for m in markers) == lost
    s = json.loads(cli("stats", str(out), "--json").stdout)
    assert s["lost"] == lost and not s["derived_behind"]
    # the op_param.json files, counted in the slot (their records found no room either)
    # and carried by the exit record the control plane wrote, in a round it names
    params = proc["params_unrecorded"]
    assert params == proc["params_lost"] > 0
    assert sum(m.get("params_lost", 0) for m in markers) == params
    assert s["params_lost"] == params


def test_a_file_whose_record_found_no_room_is_taken_back(tmp_path, small_fs):
    """The record logs' file system fills while the tensors' has room: a .bin is
    written, its record is not. No row will ever name that file, so it is removed
    and the tensor counted as lost, not as written."""
    data_fs = small_fs(FS_KIB * 8, "data")
    out = data_fs / "out"
    pretouch_block(out)
    root = out / "atb_dump_data"
    logs = root / ".probe" / "records"
    logs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0750", "tmpfs", str(logs)],
                   check=True)
    try:
        config = tmp_path / "config.json"
        config.write_text(json.dumps(DUMP_ALL))
        r = run_atbsim(out, config, *SMALL)
        assert r.returncode == 0, r.stderr[-3000:]
        wait_daemon_gone(out)
        recs = records(root)
        named = {x["path"] for x in recs if x["k"] == "tensor" and x["file"] in FILES}
        on_disk = {str(p.relative_to(root / "data")) for p in (root / "data").rglob("*.bin")}
        assert on_disk == named, f"{len(on_disk - named)} .bin files have no record"
        (proc,) = status(out)["processes"]
        assert proc["tensors_written"] == len(named) < proc["tensors_selected"]
        (ex,) = [x for x in recs if x["k"] == "exit"]
        lost = sum(x["k"] == "tensor" and x["file"] == "lost" for x in recs)
        assert lost + sum(ex["unrecorded"].values()) == proc["errors"] + proc["drops"]
    finally:
        subprocess.run(["umount", "-l", str(logs)], capture_output=True)

