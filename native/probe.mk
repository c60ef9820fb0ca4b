# Build fragment for the native probe (owner: probe). Adds to NATIVE_TARGETS and NATIVE_TEST_TARGETS.
