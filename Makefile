# msprobe-atb build. `make` builds every native artifact and the cffi extension;
# `make test`, `make demo` and `make bench` install what they need first.
# Each component owns an included fragment; this file only wires them together.

SHELL := /bin/bash
PYTHON ?= python3
BUILD := $(CURDIR)/build
VENV := $(CURDIR)/.venv
VPY := $(VENV)/bin/python
CC ?= cc
CXX ?= g++
WARN := -Wall -Wextra
CFLAGS_COMMON := $(WARN) -O2 -g -fPIC
NATIVE_TARGETS :=
NATIVE_TEST_TARGETS :=
# Standing fuzzers: each fragment adds its target; each prints, per target it runs,
# "fuzz NAME: N inputs tried, K findings" and fails on a finding.
FUZZ_TARGETS :=
# Artifacts only `make bench` needs (reference probes).
BENCH_TARGETS :=

.PHONY: all native deps pyext bytecode test native-test pytest lint demo bench clean fuzz
all: native pyext bytecode

include native/atbsim/atbsim.mk
include native/probe.mk
include bench/bench.mk

native: $(NATIVE_TARGETS)

# ---- Python environment (installs system and PyPI packages on a fresh machine) ----
$(VENV)/.stamp: pyproject.toml scripts/install_deps.sh
	bash scripts/install_deps.sh "$(PYTHON)" "$(VENV)"
	touch $@
deps: $(VENV)/.stamp

# The cffi extension compiles native/core/mechanisms/control.c with control.h,
# the same sources the shim uses, so both sides share one layout.
PYEXT_STAMP := msprobe_atb/control/.ext_stamp
$(PYEXT_STAMP): $(VENV)/.stamp native/include/msprobe_atb/control.h native/core/mechanisms/control.c msprobe_atb/control/_build.py msprobe_atb/cffi_build.py
	$(VPY) msprobe_atb/control/_build.py
	touch $@
# The fused compare-metrics kernel (native/compare) and the shim's statistics
# (native/core/mechanisms/stats.c), cffi extensions of offline/read.
KERNEL_STAMP := msprobe_atb/offline/read/.kernel_stamp
$(KERNEL_STAMP): $(VENV)/.stamp native/compare/pair_kernel.c native/compare/pair_kernel.h $(addprefix native/core/mechanisms/,stats.c stats.h stats_simd.c stats_simd.h float_acc.h hash_lane.h dtype.c dtype.h jsonw.c jsonw.h) msprobe_atb/offline/read/_build_kernel.py msprobe_atb/cffi_build.py
	$(VPY) msprobe_atb/offline/read/_build_kernel.py
	touch $@
# The control plane's ingest kernel (native/ingest): record lines in, CSV and
# manifest rows out, a cffi extension of tree/.
INGEST_STAMP := msprobe_atb/tree/.ingest_stamp
$(INGEST_STAMP): $(VENV)/.stamp $(wildcard native/ingest/*.c native/ingest/*.h) msprobe_atb/tree/_build_ingest.py msprobe_atb/cffi_build.py
	$(VPY) msprobe_atb/tree/_build_ingest.py
	touch $@
pyext: $(PYEXT_STAMP) $(KERNEL_STAMP) $(INGEST_STAMP)
# The package's bytecode, so each `msprobe-atb` call starts from .pyc files even where
# PYTHONDONTWRITEBYTECODE keeps Python from caching them (compiling the sources costs
# ~0.1 s a call). compileall skips the files that are current.
bytecode: deps
	$(VPY) -m compileall -q msprobe_atb

# ---- tests ----
native-test: native $(NATIVE_TEST_TARGETS)

lint: deps
	$(VENV)/bin/ruff check msprobe_atb tests bench

# --durations: every run names its 25 slowest tests, where `make test`'s time goes.
# The test's temporary dirs live in build/, not /tmp/pytest-of-$USER: pytest starts by
# emptying this one dir, instead of sweeping every older run's trees (dumps, deep
# hostile-path trees) out of /tmp at the end, which took minutes on a shared machine.
# The last run's is removed here, not by pytest: pytest does it inside the first
# test's setup, under that test's timeout (a run after a long one failed there).
# The tests run on PYTEST_WORKERS pytest-xdist workers, more than the 2 cores (most
# of a test's time is spent waiting on its subprocesses); --dist loadfile keeps each
# module on one worker, so a module-scoped fixture is built once; --no-loadscope-reorder
# hands the modules out in collection order, the modules marked `long` first
# (tests/conftest.py), instead of those with the most tests first. PYTEST_WORKERS=0
# runs them in one process.
# On the 2-core machine, from a fresh clone (venv already installed): `make test`
# 9 min 7 s, of which pytest 7 min 27 s (load 4.0 falling to 1.9, other tests running
# beside it), and 11 min 50 s, pytest 10 min 28 s (load 1.5 rising to 6); one test at
# a time, pytest alone took about 15 min quiet, 19.5 at load 8.
# In a worktree, with the session dumps made once for all workers, one OpenBLAS
# thread per process and the long modules first (tests/conftest.py): `make test`
# 14 min 47 s (a venv reinstall included), pytest 13 min 23 s, 9 min of CPU, at load
# 14.6 falling to 4.3; before them 17 min 49 s, pytest 16 min 4 s, 12 min of CPU, at
# load 1.9 rising to 26. Then pytest on 3 workers: 10 min 17 s, 8.7 min of CPU, at load
# 4.0 rising to 6.7 (the third worker runs while the others wait on subprocesses);
# and the whole `make test` (the build current): 8 min 24 s, pytest 8 min 9 s, 8.9 min
# of CPU, at load 4.6 to 4.3.
PYTEST_WORKERS ?= 3
pytest: all deps
	rm -rf $(BUILD)/pytest-tmp
	$(VENV)/bin/pytest -q -ra --durations=25 -n $(PYTEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder \
		--basetemp=$(BUILD)/pytest-tmp tests

# The build (native code, the native tests' binaries, the extensions) runs on both
# cores; then the native tests, ruff and pytest, one after the other.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	$(MAKE) -j$(TEST_JOBS) all $(filter-out probe-native-test,$(NATIVE_TEST_TARGETS)) $(PROBE_TEST_BINS)
	$(MAKE) native-test lint pytest

# ---- standing fuzzers (`make test` runs a short version of each) ----
# fuzz-NAME runs tests/fuzz/NAME_fuzz.py with FUZZ_ARGS_NAME:
#   config     crafted config.json edits through the validator and the shim's reader
#   reader     crafted incident files and non-UTF-8 op names through every offline reader
#   manifest   crafted manifests, part files, CSV paths and stubs through stats, compare,
#              report, query (about 5 s an input on the 2-core machine, after 40 s making
#              the real dumps)
#   scheduler  the Dask scheduler's inputs
#   replay     crafted op_param.json and tensors through replay (param values, shapes,
#              dtypes, bombs)
#   bisect     seeded faults in any layer through bisect on real dumps (about 15 s an input)
#   hostile    hostile mapping YAML, safetensors headers and configs, SQL for query, FIFOs
#              and devices in place of every file a reader opens
#   diagnose   every injected-fault case of tests/offline/test_diagnose.py (make test runs
#              a quick subset): diagnose names the injected op
#   ingest     crafted tensor records through the ingest kernel and the Python path, which
#              must write the same CSV lines and manifest rows
CONFIG_FUZZ_EXAMPLES ?= 10000
MANIFEST_FUZZ_INPUTS ?= 200
SCHEDULER_FUZZ_EXAMPLES ?= 2000
REPLAY_FUZZ_EXAMPLES ?= 3000
BISECT_FUZZ_EXAMPLES ?= 20
INGEST_FUZZ_EXAMPLES ?= 3000
FUZZ_ARGS_config = --examples $(CONFIG_FUZZ_EXAMPLES)
FUZZ_ARGS_manifest = --inputs $(MANIFEST_FUZZ_INPUTS)
FUZZ_ARGS_scheduler = --examples $(SCHEDULER_FUZZ_EXAMPLES)
FUZZ_ARGS_replay = --examples $(REPLAY_FUZZ_EXAMPLES)
FUZZ_ARGS_bisect = --examples $(BISECT_FUZZ_EXAMPLES)
FUZZ_ARGS_ingest = --examples $(INGEST_FUZZ_EXAMPLES)
PY_FUZZ_TARGETS := $(addprefix fuzz-,config reader manifest scheduler replay bisect hostile diagnose ingest)
FUZZ_TARGETS += $(PY_FUZZ_TARGETS)
.PHONY: $(PY_FUZZ_TARGETS)
$(PY_FUZZ_TARGETS): fuzz-%: all deps
	$(VPY) tests/fuzz/$*_fuzz.py $(FUZZ_ARGS_$*)

# Every target runs even if an earlier one finds something; the summary lines come last.
fuzz:
	@set -o pipefail; mkdir -p $(BUILD); rc=0; for t in $(FUZZ_TARGETS); do \
	    $(MAKE) --no-print-directory $$t 2>&1 | tee $(BUILD)/$$t.log || rc=1; done; \
	echo "---- fuzz summary ----"; grep -h '^fuzz ' $(foreach t,$(FUZZ_TARGETS),$(BUILD)/$(t).log); \
	exit $$rc

demo: all deps
	bash scripts/demo.sh

# `make bench NAME...` runs only those benchmarks (bench/NAME.py); the names are
# goals of their own, which do nothing.
BENCH_NAMES := $(filter $(basename $(notdir $(wildcard bench/*.py))),$(MAKECMDGOALS))
bench: all deps $(BENCH_TARGETS)
	$(VPY) -m bench $(BENCH_NAMES)
ifneq ($(filter bench,$(MAKECMDGOALS)),)
$(BENCH_NAMES):
	@:
endif

clean:
	rm -rf $(BUILD) $(PYEXT_STAMP) $(KERNEL_STAMP) $(INGEST_STAMP) msprobe_atb/control/_ctl*.so \
		msprobe_atb/offline/read/_pair_kernel*.so msprobe_atb/offline/read/_stats_kernel*.so msprobe_atb/tree/_ingest*.so
