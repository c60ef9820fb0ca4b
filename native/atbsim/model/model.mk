# Build fragment for the stand-in model and the atbsim command (owner: atbsim model).
# Per ABI N: build/atbsim/cxx_abi_N/lib/libatbsim_model.so (the model + its C API)
# and build/atbsim/cxx_abi_N/bin/atbsim (CLI: run / serve), linked against that
# ABI's libatb.so / libatb_speed.so. Uses the ATBSIM_* variables of atbsim.mk.

ATBSIM_MODEL_DIR := $(ATBSIM_DIR)/model
ATBSIM_MODEL_HEADERS := $(wildcard $(ATBSIM_MODEL_DIR)/*.h) $(ATBSIM_MODEL_DIR)/include/atbsim_model.h
# The command's own sources; everything else goes into the library.
ATBSIM_CLI_SRCS := $(addprefix $(ATBSIM_MODEL_DIR)/,main.cpp serve.cpp http.cpp)
ATBSIM_MODEL_SRCS := $(filter-out $(ATBSIM_CLI_SRCS),$(wildcard $(ATBSIM_MODEL_DIR)/*.cpp))

# $(1) = ABI value
define ATBSIM_MODEL_ABI_RULES
ATBSIM_MODEL_OBJ_abi$(1) := $(BUILD)/obj/atbsim_model/abi$(1)
ATBSIM_MODEL_LIB_abi$(1) := $$(ATBSIM_HOME_abi$(1))/lib/libatbsim_model.so
ATBSIM_BIN_abi$(1) := $$(ATBSIM_HOME_abi$(1))/bin/atbsim

$$(ATBSIM_MODEL_OBJ_abi$(1))/%.o: $(ATBSIM_MODEL_DIR)/%.cpp $(ATBSIM_MODEL_HEADERS) $(ATBSIM_HEADERS)
	@mkdir -p $$(@D)
	$(CXX) $$(ATBSIM_CXXFLAGS_abi$(1)) -I$(CURDIR)/$(ATBSIM_MODEL_DIR)/include -c -o $$@ $$<

$$(ATBSIM_MODEL_LIB_abi$(1)): $$(patsubst $(ATBSIM_MODEL_DIR)/%.cpp,$$(ATBSIM_MODEL_OBJ_abi$(1))/%.o,$(ATBSIM_MODEL_SRCS)) $$(ATBSIM_LIBS_abi$(1))
	$(CXX) -shared -Wl,-z,relro,-z,now -Wl,-rpath,'$$$$ORIGIN' -o $$@ $$(filter %.o,$$^) \
	    -L$$(@D) $(ATBSIM_LDLIBS)

$$(ATBSIM_BIN_abi$(1)): $$(patsubst $(ATBSIM_MODEL_DIR)/%.cpp,$$(ATBSIM_MODEL_OBJ_abi$(1))/%.o,$(ATBSIM_CLI_SRCS)) $$(ATBSIM_MODEL_LIB_abi$(1))
	@mkdir -p $$(@D)
	$(CXX) -o $$@ $$(filter %.o,$$^) $$(ATBSIM_LDFLAGS_abi$(1)) -latbsim_model $(ATBSIM_LDLIBS)

ATBSIM_MODEL_TARGETS += $$(ATBSIM_MODEL_LIB_abi$(1)) $$(ATBSIM_BIN_abi$(1))
endef

ATBSIM_MODEL_TARGETS :=
$(foreach a,0 1,$(eval $(call ATBSIM_MODEL_ABI_RULES,$(a))))

.PHONY: atbsim-model
atbsim-model: $(ATBSIM_MODEL_TARGETS)
NATIVE_TARGETS += $(ATBSIM_MODEL_TARGETS)
