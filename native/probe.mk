# Build fragment for the native probe (owner: probe). Adds to NATIVE_TARGETS and NATIVE_TEST_TARGETS.
#
# libatb_probe_abi{0,1}.so = the C11 core (compiled once, ABI-neutral) + the
# C++ adapter compiled per libstdc++ ABI. Linked with the C driver and
# -z defs, so a stray libstdc++ dependency fails the build: the library is
# preloaded into every process of the user's shell.

# The core's files sit in one folder a tier (native/core/README); names are
# unique across them, so objects and includes go by name alone.
PROBE_CORE_DIRS := $(addprefix native/core/,hooks lifecycle mechanisms)
vpath %.c $(PROBE_CORE_DIRS)
PROBE_CORE_SRC := $(sort $(notdir $(wildcard $(addsuffix /*.c,$(PROBE_CORE_DIRS)))))
PROBE_CORE_HDR := $(wildcard $(addsuffix /*.h,$(PROBE_CORE_DIRS))) \
	$(wildcard native/include/msprobe_atb/*.h)
PROBE_B := $(BUILD)/probe
PROBE_LIBS := $(BUILD)/lib/libatb_probe_abi0.so $(BUILD)/lib/libatb_probe_abi1.so
PROBE_HOSTS := $(PROBE_B)/bin/probe_host_abi0 $(PROBE_B)/bin/probe_host_abi1
PROBE_INC := -Inative/include $(addprefix -I,$(PROBE_CORE_DIRS)) -Inative/adapter
PROBE_DECL := native/adapter/atb_probe_decl.h
# initial-exec TLS: a hook reads its thread's words (its op count, its top-level
# op, its unmapped ops) at a fixed offset from %fs, with no __tls_get_addr call;
# the shim is preloaded, so static TLS has room for them
PROBE_CFLAGS := -std=c11 $(WARN) -O2 -g -fPIC -pthread -fvisibility=hidden -ftls-model=initial-exec \
	$(PROBE_INC)
PROBE_CXXFLAGS := -std=c++17 $(WARN) -O2 -g -fPIC -fvisibility=hidden -fno-exceptions -fno-rtti \
	-fno-asynchronous-unwind-tables $(PROBE_INC)
PROBE_LDFLAGS := -shared -pthread -Wl,--version-script=native/adapter/exports.map -Wl,-z,defs \
	-Wl,-z,now -Wl,-z,relro -Wl,--as-needed
PROBE_LDLIBS := -lm -ldl

.PHONY: probe probe-native-test
probe: $(PROBE_LIBS) $(PROBE_HOSTS)
NATIVE_TARGETS += probe

# ---- release objects (rebuilt when PROBE_CFLAGS here change) ----
$(PROBE_B)/obj/%.o: %.c $(PROBE_CORE_HDR) native/probe.mk
	@mkdir -p $(@D)
	$(CC) $(PROBE_CFLAGS) -c $< -o $@

$(PROBE_B)/obj/adapter_abi%.o: native/adapter/hooks.cpp $(PROBE_CORE_HDR) $(PROBE_DECL)
	@mkdir -p $(@D)
	$(CXX) $(PROBE_CXXFLAGS) -D_GLIBCXX_USE_CXX11_ABI=$* -c $< -o $@

PROBE_CORE_OBJ := $(patsubst %.c,$(PROBE_B)/obj/%.o,$(PROBE_CORE_SRC))

$(BUILD)/lib/libatb_probe_abi%.so: $(PROBE_CORE_OBJ) $(PROBE_B)/obj/adapter_abi%.o native/adapter/exports.map
	@mkdir -p $(@D)
	$(CC) $(PROBE_LDFLAGS) -o $@ $(PROBE_CORE_OBJ) $(PROBE_B)/obj/adapter_abi$*.o $(PROBE_LDLIBS)

# A tiny ATB stand-in host that calls the hooks from a command script
# (tests/probe drive it). It links the real shim, plus its own copy of the
# control block code to publish configs.
$(PROBE_B)/bin/probe_host_abi%: native/tests/probe_host.cpp $(PROBE_DECL) native/core/mechanisms/control.c $(BUILD)/lib/libatb_probe_abi%.so
	@mkdir -p $(@D)
	$(CC) -std=c11 $(WARN) -O2 -g -Inative/include -c native/core/mechanisms/control.c -o $(PROBE_B)/obj/host_control_$*.o
	$(CXX) -std=c++17 $(WARN) -O2 -g -pthread -D_GLIBCXX_USE_CXX11_ABI=$* $(PROBE_INC) \
		native/tests/probe_host.cpp $(PROBE_B)/obj/host_control_$*.o \
		-L$(BUILD)/lib -l:libatb_probe_abi$*.so -Wl,-rpath,$(BUILD)/lib -o $@

# `make bench`'s hosts that call the hooks as ATB does, linked against the
# stand-in libatb.so, whose constant-returns hook defaults the probe
# interposes with LD_PRELOAD: the hook loop (bench/hook_overhead.py) and the
# record path's tiny tensors under `task: statistics` (bench/record_cost.py).
PROBE_BENCH_HOSTS := $(PROBE_B)/bin/hook_loop $(PROBE_B)/bin/record_bench
$(PROBE_BENCH_HOSTS): $(PROBE_B)/bin/%: native/tests/%.cpp $(PROBE_DECL) $(ATBSIM_LIBS_abi1)
	@mkdir -p $(@D)
	$(CXX) $(ATBSIM_CXXFLAGS_abi1) -O2 $(PROBE_INC) $< -L$(BUILD)/atbsim/cxx_abi_1/lib \
		-Wl,-rpath,$(BUILD)/atbsim/cxx_abi_1/lib -latb -lascendcl -o $@
probe: $(PROBE_BENCH_HOSTS)

# `make bench`'s load generator (bench/stats_pace.py, tests/probe/test_loadgen.py):
# a Llama-70B-shaped model's hook calls on N forked devices, linked against the
# stand-in runtime (libatb.so, libatb_speed.so, libascendcl.so), whose hook
# defaults the probe interposes with LD_PRELOAD. One build per ABI.
LOADGEN_SRC := $(wildcard native/tests/loadgen/*.cpp)
LOADGEN_HDR := $(wildcard native/tests/loadgen/*.h)
define LOADGEN_RULE
$(PROBE_B)/bin/loadgen_abi$(1): $(LOADGEN_SRC) $(LOADGEN_HDR) $(PROBE_DECL) $$(ATBSIM_LIBS_abi$(1))
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -Inative/adapter $(LOADGEN_SRC) \
		-L$(BUILD)/atbsim/cxx_abi_$(1)/lib -Wl,-rpath,$(BUILD)/atbsim/cxx_abi_$(1)/lib \
		-Wl,-z,relro,-z,now $(ATBSIM_LDLIBS) -o $$@
BENCH_TARGETS += $(PROBE_B)/bin/loadgen_abi$(1)
NATIVE_TEST_TARGETS += $(PROBE_B)/bin/loadgen_abi$(1)
endef
$(foreach a,0 1,$(eval $(call LOADGEN_RULE,$(a))))

# `make bench`'s statistics throughput (bench/stats_throughput.py): the
# release objects of the statistics, as the writers run them.
PROBE_STATS_BENCH := $(PROBE_B)/bin/stats_bench
PROBE_STATS_OBJ := $(foreach m,stats stats_simd dtype jsonw util,$(PROBE_B)/obj/$(m).o)
$(PROBE_STATS_BENCH): native/tests/stats_bench.c $(PROBE_STATS_OBJ)
	@mkdir -p $(@D)
	$(CC) $(PROBE_CFLAGS) $^ -o $@ -lm
probe: $(PROBE_STATS_BENCH)

# ---- sanitizer builds (core + adapter linked straight into the test programs) ----
PROBE_SAN_asan := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
PROBE_SAN_tsan := -fsanitize=thread

$(PROBE_B)/asan/%.o: %.c $(PROBE_CORE_HDR)
	@mkdir -p $(@D)
	$(CC) $(PROBE_CFLAGS) -O1 $(PROBE_SAN_asan) -c $< -o $@
$(PROBE_B)/tsan/%.o: %.c $(PROBE_CORE_HDR)
	@mkdir -p $(@D)
	$(CC) $(PROBE_CFLAGS) -O1 $(PROBE_SAN_tsan) -c $< -o $@

PROBE_ASAN_OBJ := $(patsubst %.c,$(PROBE_B)/asan/%.o,$(PROBE_CORE_SRC))
PROBE_TSAN_OBJ := $(patsubst %.c,$(PROBE_B)/tsan/%.o,$(PROBE_CORE_SRC))
PROBE_UNIT_MODS := util jsonw dtype stats stats_simd tensorscan binfile fsutil dirchain content_hash filter selcache dirmemo ring ring_overwrite queue dedup pending rounds slot window overflow_finding

$(PROBE_B)/bin/test_core_asan: native/tests/test_core.c $(foreach m,$(PROBE_UNIT_MODS),$(PROBE_B)/asan/$(m).o)
	@mkdir -p $(@D)
	$(CC) $(PROBE_CFLAGS) -O1 $(PROBE_SAN_asan) $^ -o $@ -lm

$(PROBE_B)/bin/stress_asan_abi%: native/tests/probe_host.cpp native/adapter/hooks.cpp $(PROBE_DECL) $(PROBE_ASAN_OBJ)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(WARN) -O1 -g -pthread -D_GLIBCXX_USE_CXX11_ABI=$* $(PROBE_INC) $(PROBE_SAN_asan) \
		native/tests/probe_host.cpp native/adapter/hooks.cpp $(PROBE_ASAN_OBJ) -o $@ -lm -ldl

$(PROBE_B)/bin/stress_tsan_abi1: native/tests/probe_host.cpp native/adapter/hooks.cpp $(PROBE_DECL) $(PROBE_TSAN_OBJ)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(WARN) -O1 -g -pthread -D_GLIBCXX_USE_CXX11_ABI=1 $(PROBE_INC) $(PROBE_SAN_tsan) \
		native/tests/probe_host.cpp native/adapter/hooks.cpp $(PROBE_TSAN_OBJ) -o $@ -lm -ldl

# The hook fuzzer (native/tests/hook_fuzz.cpp): the shim under ASan/UBSan with
# the real control plane; `make fuzz` runs it long, `make test` briefly.
PROBE_FUZZ_BIN := $(PROBE_B)/bin/hook_fuzz_asan
$(PROBE_FUZZ_BIN): native/tests/hook_fuzz.cpp native/adapter/hooks.cpp $(PROBE_DECL) $(PROBE_ASAN_OBJ)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(WARN) -O1 -g -pthread -D_GLIBCXX_USE_CXX11_ABI=1 $(PROBE_INC) $(PROBE_SAN_asan) \
		native/tests/hook_fuzz.cpp native/adapter/hooks.cpp $(PROBE_ASAN_OBJ) -o $@ -lm -ldl

NATIVE_FUZZ_CALLS ?= 100000
FUZZ_TARGETS += fuzz-native
.PHONY: fuzz-native
fuzz-native: all deps $(PROBE_FUZZ_BIN)
	$(VPY) tests/fuzz/native_fuzz.py --calls $(NATIVE_FUZZ_CALLS)

.PRECIOUS: $(PROBE_B)/obj/%.o $(PROBE_B)/obj/adapter_abi%.o $(PROBE_B)/asan/%.o $(PROBE_B)/tsan/%.o

PROBE_TEST_BINS := $(PROBE_B)/bin/test_core_asan $(PROBE_B)/bin/stress_asan_abi0 \
	$(PROBE_B)/bin/stress_asan_abi1 $(PROBE_B)/bin/stress_tsan_abi1 $(PROBE_FUZZ_BIN)

probe-native-test: $(PROBE_TEST_BINS)
	bash native/tests/run_native_tests.sh $(PROBE_B)/bin
NATIVE_TEST_TARGETS += probe-native-test
