# Bench-only artifacts of the bench itself (BENCH_TARGETS).
#
# msProbe 26.2.0's own ATB shim, the reference `make bench write_throughput`
# measures ours against: the wheel from PyPI, unpacked into build/msprobe_ref
# (its libatb_probe_abi{0,1}.so under msprobe/lib). Without a network the bench
# says the reference is absent and goes on without it, so this never fails.
MSPROBE_REF := $(BUILD)/msprobe_ref
MSPROBE_REF_VERSION := 26.2.0
BENCH_TARGETS += msprobe-ref
.PHONY: msprobe-ref
msprobe-ref: deps
	@test -f $(MSPROBE_REF)/msprobe/lib/libatb_probe_abi1.so || { \
	    mkdir -p $(MSPROBE_REF) && \
	    $(VPY) -m pip download -q --no-deps -d $(MSPROBE_REF) mindstudio-probe==$(MSPROBE_REF_VERSION) && \
	    $(VPY) -m zipfile -e $(MSPROBE_REF)/mindstudio_probe-$(MSPROBE_REF_VERSION)-*.whl $(MSPROBE_REF); } || \
	    echo "msProbe $(MSPROBE_REF_VERSION) not downloaded: make bench runs without its shim"
