# Build fragment for the stand-in ATB runtime: libascendcl.so, libatb.so and
# libatb_speed.so per ABI (owner: atbsim runtime). The model and the `atbsim`
# command are built by native/atbsim/model/model.mk (owner: atbsim model).
#
# Variables for other fragments (N = 0 or 1, the _GLIBCXX_USE_CXX11_ABI value):
#   ATBSIM_INC            -I flags: native/atbsim/runtime (atbsim/runtime.h, atb/probe.h)
#                         and native/atbsim/acl/include (acl/acl.h)
#   ATBSIM_HEADERS        the public headers (use as prerequisites)
#   ATBSIM_HOME_abiN      build/atbsim/cxx_abi_N (ATB_HOME_PATH); put binaries in its bin/
#   ATBSIM_CXXFLAGS_abiN  C++17 flags incl. -D_GLIBCXX_USE_CXX11_ABI=N, -fPIC and ATBSIM_INC
#   ATBSIM_RT_LIB_abiN    .../lib/libatb.so
#   ATBSIM_SPEED_LIB_abiN .../lib/libatb_speed.so (atb_speed::Model)
#   ATBSIM_ACL_LIB_abiN   .../lib/libascendcl.so
#   ATBSIM_LIBS_abiN      all three (prerequisites of anything linking them)
#   ATBSIM_LDFLAGS_abiN   -L.../lib, RUNPATH $ORIGIN/../lib (for bin/), relro/now
#   ATBSIM_LDLIBS         -latb_speed -latb -lascendcl -lpthread
# Phony target: atbsim-runtime (both ABIs, libs + set_env.sh).
# Test artifacts (NATIVE_TEST_TARGETS): build/test/librecording_probe_abiN.so,
# build/test/protocol_host_abiN. Bench artifact (BENCH_TARGETS): build/test/libhandover_probe_abiN.so.

ATBSIM_DIR := native/atbsim
ATBSIM_INC := -I$(CURDIR)/$(ATBSIM_DIR)/runtime -I$(CURDIR)/$(ATBSIM_DIR)/acl/include
ATBSIM_HEADERS := $(ATBSIM_DIR)/runtime/atbsim/runtime.h $(ATBSIM_DIR)/runtime/atb/probe.h \
                  $(ATBSIM_DIR)/acl/include/acl/acl.h
ATBSIM_PRIV_HEADERS := $(wildcard $(ATBSIM_DIR)/runtime/*.h)
ATBSIM_LDLIBS := -latb_speed -latb -lascendcl -lpthread
# ATB's own flags (docs/atb_hooks.md §1.2): hooks stay interposable through the PLT.
ATBSIM_SO_LDFLAGS = -shared -Wl,-z,relro,-z,now -Wl,-rpath,'$$ORIGIN'

ATBSIM_SPEED_SRCS := $(ATBSIM_DIR)/runtime/model.cpp $(ATBSIM_DIR)/runtime/speed_probe_defaults.cpp
ATBSIM_RT_SRCS := $(filter-out $(ATBSIM_SPEED_SRCS),$(wildcard $(ATBSIM_DIR)/runtime/*.cpp))

# ---- libascendcl.so: built once (plain C, ABI-neutral), copied into both ABI dirs ----
ATBSIM_ACL_SO := $(BUILD)/atbsim/acl/libascendcl.so
$(ATBSIM_ACL_SO): $(ATBSIM_DIR)/acl/acl.c $(ATBSIM_DIR)/acl/include/acl/acl.h
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS_COMMON) $(ATBSIM_INC) -shared -Wl,-z,relro,-z,now -o $@ $<

# $(1) = ABI value
define ATBSIM_ABI_RULES
ATBSIM_HOME_abi$(1) := $(BUILD)/atbsim/cxx_abi_$(1)
ATBSIM_OBJ_abi$(1) := $(BUILD)/obj/atbsim/abi$(1)
ATBSIM_CXXFLAGS_abi$(1) := -std=c++17 $(WARN) -O2 -g -fPIC -fvisibility-inlines-hidden \
    -D_GLIBCXX_USE_CXX11_ABI=$(1) $(ATBSIM_INC)
ATBSIM_RT_LIB_abi$(1) := $(BUILD)/atbsim/cxx_abi_$(1)/lib/libatb.so
ATBSIM_SPEED_LIB_abi$(1) := $(BUILD)/atbsim/cxx_abi_$(1)/lib/libatb_speed.so
ATBSIM_ACL_LIB_abi$(1) := $(BUILD)/atbsim/cxx_abi_$(1)/lib/libascendcl.so
ATBSIM_LIBS_abi$(1) := $$(ATBSIM_SPEED_LIB_abi$(1)) $$(ATBSIM_RT_LIB_abi$(1)) $$(ATBSIM_ACL_LIB_abi$(1))
ATBSIM_LDFLAGS_abi$(1) = -L$(BUILD)/atbsim/cxx_abi_$(1)/lib -Wl,-rpath,'$$$$ORIGIN/../lib' \
    -Wl,-z,relro,-z,now

$$(ATBSIM_OBJ_abi$(1))/%.o: $(ATBSIM_DIR)/runtime/%.cpp $(ATBSIM_HEADERS) $(ATBSIM_PRIV_HEADERS)
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -c -o $$@ $$<

$$(ATBSIM_ACL_LIB_abi$(1)): $(ATBSIM_ACL_SO)
	@mkdir -p $$(@D)
	cp -f $$< $$@

$$(ATBSIM_RT_LIB_abi$(1)): $$(patsubst $(ATBSIM_DIR)/runtime/%.cpp,$$(ATBSIM_OBJ_abi$(1))/%.o,$(ATBSIM_RT_SRCS)) $$(ATBSIM_ACL_LIB_abi$(1))
	$(CXX) $$(ATBSIM_SO_LDFLAGS) -o $$@ $$(filter %.o,$$^) -L$$(@D) -lascendcl -lpthread

$$(ATBSIM_SPEED_LIB_abi$(1)): $$(patsubst $(ATBSIM_DIR)/runtime/%.cpp,$$(ATBSIM_OBJ_abi$(1))/%.o,$(ATBSIM_SPEED_SRCS)) $$(ATBSIM_RT_LIB_abi$(1))
	$(CXX) $$(ATBSIM_SO_LDFLAGS) -o $$@ $$(filter %.o,$$^) -L$$(@D) -latb -lascendcl -lpthread

# Sourced like real ATB's set_env.sh.
$$(ATBSIM_HOME_abi$(1))/set_env.sh: $(ATBSIM_DIR)/atbsim.mk
	@mkdir -p $$(@D)
	printf '%s\n' '# stand-in ATB (atbsim), cxx_abi_$(1): source this file' \
	  'export ATB_HOME_PATH="$$(ATBSIM_HOME_abi$(1))"' \
	  'export LD_LIBRARY_PATH="$$$${ATB_HOME_PATH}/lib$$$${LD_LIBRARY_PATH:+:$$$${LD_LIBRARY_PATH}}"' > $$@

# ---- test-only artifacts ----
$(BUILD)/test/librecording_probe_abi$(1).so: $(ATBSIM_DIR)/testing/recording_probe.cpp $(ATBSIM_HEADERS)
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -shared -Wl,-z,relro,-z,now -o $$@ $$< -ldl -lpthread

$(BUILD)/test/libhandover_probe_abi$(1).so: $(ATBSIM_DIR)/testing/handover_probe.cpp $(ATBSIM_HEADERS)
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -shared -Wl,-z,relro,-z,now -o $$@ $$<

$(BUILD)/test/protocol_host_abi$(1): $(ATBSIM_DIR)/testing/protocol_host.cpp $(ATBSIM_HEADERS) $$(ATBSIM_LIBS_abi$(1))
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -o $$@ $$< -L$$(ATBSIM_HOME_abi$(1))/lib \
	    -Wl,-rpath,$$(ATBSIM_HOME_abi$(1))/lib -Wl,-z,relro,-z,now $(ATBSIM_LDLIBS)

ATBSIM_RUNTIME_TARGETS += $$(ATBSIM_LIBS_abi$(1)) $$(ATBSIM_HOME_abi$(1))/set_env.sh
ATBSIM_RUNTIME_TEST_TARGETS += $(BUILD)/test/librecording_probe_abi$(1).so \
    $(BUILD)/test/protocol_host_abi$(1)
BENCH_TARGETS += $(BUILD)/test/libhandover_probe_abi$(1).so
endef

ATBSIM_RUNTIME_TARGETS :=
ATBSIM_RUNTIME_TEST_TARGETS :=
$(foreach a,0 1,$(eval $(call ATBSIM_ABI_RULES,$(a))))

.PHONY: atbsim-runtime atbsim-runtime-test
atbsim-runtime: $(ATBSIM_RUNTIME_TARGETS)
atbsim-runtime-test: $(ATBSIM_RUNTIME_TEST_TARGETS)
NATIVE_TARGETS += $(ATBSIM_RUNTIME_TARGETS)
NATIVE_TEST_TARGETS += $(ATBSIM_RUNTIME_TEST_TARGETS)

include native/atbsim/model/model.mk
