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

.PHONY: all native deps pyext test native-test pytest lint demo bench clean
all: native pyext

include native/atbsim/atbsim.mk
include native/probe.mk

native: $(NATIVE_TARGETS)

# ---- Python environment (installs system and PyPI packages on a fresh machine) ----
$(VENV)/.stamp: pyproject.toml scripts/install_deps.sh
	bash scripts/install_deps.sh "$(PYTHON)" "$(VENV)"
	touch $@
deps: $(VENV)/.stamp

# The cffi extension compiles native/core/control.c with control.h, the same
# sources the shim uses, so both sides share one layout.
PYEXT_STAMP := msprobe_atb/control/.ext_stamp
$(PYEXT_STAMP): $(VENV)/.stamp native/include/msprobe_atb/control.h native/core/control.c msprobe_atb/control/_build.py
	$(VPY) msprobe_atb/control/_build.py
	touch $@
pyext: $(PYEXT_STAMP)

# ---- tests ----
native-test: native $(NATIVE_TEST_TARGETS)

lint: deps
	$(VENV)/bin/ruff check msprobe_atb tests bench

pytest: all deps
	$(VENV)/bin/pytest -q -ra tests

test: all native-test lint pytest

demo: all deps
	bash scripts/demo.sh

bench: all deps
	$(VPY) -m bench

clean:
	rm -rf $(BUILD) $(PYEXT_STAMP) msprobe_atb/control/_ctl*.so
