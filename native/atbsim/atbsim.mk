# Build fragment for the stand-in ATB runtime (owner: atbsim). Adds to NATIVE_TARGETS.
