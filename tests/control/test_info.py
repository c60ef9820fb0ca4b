"""info/layer and info/model builders on normal and odd graphs."""

from __future__ import annotations

import json

import msprobe_info_form as form
import pytest
from cp_helpers import derived

from msprobe_atb.tree.drain import rebuild
from msprobe_atb.tree.info import GraphError, layer_json, model_json, parse_json_object

LAYER = {
    "inTensorNum": 3, "internalTensorNum": 1, "opName": "Layer_7", "opType": "Layer",
    "outTensorNum": 1, "param": "",
    "nodes": [
        {"inTensorIds": [0, 1], "inTensorNum": 2, "opName": "ElewiseOperation_7_0",
         "opType": "ElewiseOperation", "outTensorIds": [4], "outTensorNum": 1,
         "param": {"elewiseType": 8}},
        {"inTensorIds": [4, 2], "inTensorNum": 2, "opName": "Sub_7_1", "opType": "Sub",
         "outTensorIds": [3], "outTensorNum": 1, "internalTensorNum": 1, "param": "",
         "nodes": [{"inTensorIds": [0, 1], "opName": "LinearOperation_7_1_0",
                    "opType": "LinearOperation", "outTensorIds": [3], "param": {}},
                   {"inTensorIds": [3], "opName": "Add_7_1_1", "opType": "Add",
                    "outTensorIds": [2], "param": {}}]},
    ],
}


def test_layer_tensor_names_resolved():
    doc, warnings = layer_json("Layer_7", LAYER)
    assert warnings == []
    assert list(doc) == ["opName", "opType", "param", "inTensors", "outTensors",
                         "internalTensors", "nodes"]
    assert doc["inTensors"] == ["Layer_7_input_0", "Layer_7_input_1", "Layer_7_input_2"]
    assert doc["outTensors"] == ["Layer_7_output_0"]
    assert doc["internalTensors"] == ["Layer_7_internal_0"]
    n0, n1 = doc["nodes"]
    assert n0["inTensors"] == ["Layer_7_input_0", "Layer_7_input_1"]
    assert n0["outTensors"] == ["Layer_7_internal_0"]
    assert n0["param"] == {"elewiseType": 8} and "nodes" not in n0
    assert n1["internalTensors"] == ["Sub_7_1_internal_0"]
    c0, c1 = n1["nodes"]
    assert c0["inTensors"] == ["Layer_7_internal_0", "Layer_7_input_2"]
    assert c0["outTensors"] == ["Sub_7_1_internal_0"]
    assert c1["outTensors"] == ["Layer_7_output_0"]


def test_nodes_without_inputs_or_outputs():
    graph = {"opName": "L_0", "opType": "L", "inTensorNum": 0, "outTensorNum": 0, "param": "",
             "nodes": [{"opName": "EventOperation_0_0", "opType": "EventOperation",
                        "inTensorIds": [], "outTensorIds": []},
                       {"opName": "SendOperation_0_1", "opType": "SendOperation"}]}
    doc, _ = layer_json("L_0", graph)
    # msProbe writes no key for an empty list
    assert [list(n) for n in doc["nodes"]] == [["opName", "opType", "param"]] * 2
    assert list(doc) == ["opName", "opType", "param", "nodes"]


def test_info_files_in_msprobe_form(out_dir, shims):
    """The files the builder writes for ATB's graphs equal msProbe's byte for
    byte (fixtures in msprobe_info_form.py)."""
    a = shims(out_dir, dev=0)
    a.graph("WordEmbedding_0", form.WORD_EMBEDDING_GRAPH, dev=0)
    a.graph("Decoder_layer_1", form.LAYER_GRAPH, dev=0)
    a.record({"k": "topo", "model": "DecoderModel", "dev": 0, "json": form.MODEL_TOPO})
    a.exit()
    dump_root = out_dir / "atb_dump_data"
    want = {f"info/layer/0_{a.pid}/WordEmbedding_0.json": form.WORD_EMBEDDING_FILE,
            f"info/layer/0_{a.pid}/Decoder_layer_1.json": form.LAYER_FILE,
            f"info/model/0_{a.pid}/DecoderModel.json": form.MODEL_FILE}
    rebuild(dump_root, a.block)
    assert {k: v for k, v in derived(dump_root).items() if k.startswith("info/")} == want


def test_missing_keys_and_bad_types_do_not_raise():
    doc, warnings = layer_json("X_1", {"nodes": [None, 3, {"inTensorIds": "zz"},
                                                  {"inTensorIds": [99, -1, "a"]}]})
    assert doc["opName"] == "X_1" and len(doc["nodes"]) == 4
    assert doc["nodes"][3]["inTensors"] == ["unresolved_99", "unresolved_-1", "unresolved_a"]
    assert any("lacks" in w for w in warnings) and any("out of range" in w for w in warnings)


def test_name_mismatch_is_warned():
    _, warnings = layer_json("Layer_8", LAYER)
    assert any("differs" in w for w in warnings)


def test_deep_nesting_is_refused_cleanly():
    node: dict = {"opName": "leaf"}
    for i in range(500):
        node = {"opName": f"n{i}", "nodes": [node]}
    with pytest.raises(GraphError, match="nested deeper"):
        layer_json("deep", {"opName": "deep", "nodes": [node]})
    with pytest.raises(GraphError):
        parse_json_object("[" * 200000 + "]" * 200000, "graph")


def test_bad_json():
    with pytest.raises(GraphError, match="not valid JSON"):
        parse_json_object('{"opName": ', "graph")
    with pytest.raises(GraphError, match="not a JSON object"):
        parse_json_object("[1]", "graph")
    with pytest.raises(GraphError):
        parse_json_object(None, "graph")


def test_model_merge():
    topo = {"inTensors": ["m_input_0", "m_input_1", "m_input_2"], "modelName": "m",
            "internalTensors": ["m_internal_0"],
            "nodes": [{"inTensors": ["m_input_0"], "opName": "WordEmbedding",
                       "outTensors": ["m_internal_0"]},
                      {"inTensors": ["m_internal_0", "m_input_1", "m_input_2"],
                       "opName": "Layer", "outTensors": ["m_output_0"]}],
            "outTensors": ["m_output_0"]}
    graphs = {"Layer_1": LAYER}
    doc, counter, _ = model_json(topo, graphs, 0)
    assert counter == 2
    n0, n1 = doc["nodes"]
    assert (n0["opName"], n0["opType"]) == ("WordEmbedding_0", "WordEmbedding")
    assert "nodes" not in n0
    assert (n1["opName"], n1["opType"]) == ("Layer_1", "Layer")
    assert n1["internalTensors"] == ["Layer_1_internal_0"]
    assert n1["nodes"][0]["inTensors"] == ["m_internal_0", "m_input_1"]
    assert n1["nodes"][1]["nodes"][1]["outTensors"] == ["m_output_0"]
    # the counter runs on across models of the process
    _, counter, _ = model_json(topo, graphs, counter)
    assert counter == 4
    assert json.loads(json.dumps(doc)) == doc


def test_expansion_budget_keeps_large_real_graphs_and_refuses_bombs():
    from msprobe_atb.tree.info import MAX_DOC_BYTES, dumps

    big = {"opName": "L_0", "opType": "L", "inTensorNum": 2, "outTensorNum": 1,
           "nodes": [{"opName": f"Op_{i}", "inTensorIds": [0, 1], "outTensorIds": [2],
                      "internalTensorNum": 100} for i in range(2000)]}
    doc, _ = layer_json("L_0", big)  # 200,000 names: a large but plausible layer
    assert len(dumps(doc)) < MAX_DOC_BYTES
    bomb = {**big, "nodes": [{**n, "internalTensorNum": 1 << 20} for n in big["nodes"][:8]]}
    with pytest.raises(GraphError, match="larger than 16 MiB"):
        layer_json("L_0", bomb)
    with pytest.raises(GraphError, match="characters of JSON"):
        parse_json_object(" " * (16 << 20) + "{}", "graph L_0")


def test_processes_reporting_the_same_graphs_share_their_documents(monkeypatch):
    """The devices of a service report the same graphs: each document is built
    once (a daemon over 8 devices' 80-layer models spent a second on it), and
    what differs (a graph's text, the model counter, the graphs a model merges)
    is built anew."""
    import msprobe_atb.tree.procinfo as procinfo

    monkeypatch.setattr(procinfo, "_BUILT", {})
    calls = {"layer": 0, "model": 0}

    def counted(kind, fn):
        def call(*args):
            calls[kind] += 1
            return fn(*args)
        return call

    monkeypatch.setattr(procinfo, "layer_json", counted("layer", procinfo.layer_json))
    monkeypatch.setattr(procinfo, "model_json", counted("model", procinfo.model_json))
    topo = {"modelName": "m", "inTensors": ["m_input_0"], "outTensors": ["m_output_0"],
            "nodes": [{"opName": "Layer", "inTensors": ["m_input_0"],
                       "outTensors": ["m_output_0"]}]}

    problems: list = []

    def problem(kind, message):
        problems.append(message)

    def report(proc, layer):
        proc.add_graph({"name": "Layer_0", "dev": -1, "json": json.dumps(layer)}, problem)
        proc.add_topo({"model": "m", "dev": -1, "json": json.dumps(topo)}, problem)

    procs = [procinfo.ProcInfo(pid) for pid in (11, 12)]
    for p in procs:
        report(p, {**LAYER, "opName": "Layer_0"})
    assert calls == {"layer": 1, "model": 1}
    assert procs[0].files().keys() != procs[1].files().keys()  # each its own files ...
    assert sorted(procs[0].files().values()) == sorted(procs[1].files().values())  # ... alike
    assert procs[0].model_counter == procs[1].model_counter == 1

    report(procs[0], {**LAYER, "opName": "Layer_0"})  # the counter moved on: a new model
    assert calls == {"layer": 1, "model": 2}
    other = procinfo.ProcInfo(13)  # another graph of that name: both built anew
    report(other, {**LAYER, "opName": "Layer_0", "opType": "Other"})
    assert calls == {"layer": 2, "model": 3}
    assert other.files() != procs[1].files()
    # a shared document's warnings are each process's own
    assert {m.split(":")[0] for m in problems} == {"pid 11", "pid 12", "pid 13"}
