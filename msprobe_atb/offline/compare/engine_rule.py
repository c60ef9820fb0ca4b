"""Where a compare's tensor pairs run (`compare --engine`, `-j`): the engines and the
rule `auto` follows (the default number of workers: read/cores.py). pair_engine.py
applies them; this module imports nothing heavy, so the command line can offer them
without loading numpy or polars.
"""

from __future__ import annotations

ENGINES = ("auto", "local-cluster", "in-process")
# In-process compare rates on one core of the 2-core reference machine (bench
# compare_speed: 1.5-1.7 GB/s of both sides' bytes per CPU second; 6,000-9,000
# small pairs per second), and the estimated in-process time from which `auto`
# starts the local cluster: its start-up (2-3.5 s to ready workers there) also
# takes CPU from the in-process work, so below this it would not pay for itself.
IN_PROCESS_BYTES_PER_S = 1.5e9
IN_PROCESS_PAIRS_PER_S = 5000.0
LOCAL_CLUSTER_MIN_S = 5.0
# How long `compare --scheduler` waits for an existing cluster to answer (dask_connect.py).
CONNECT_TIMEOUT_S = 10.0
