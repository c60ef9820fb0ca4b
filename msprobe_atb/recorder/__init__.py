"""The flight recorder's control-plane side: the trigger and incidents commands,
and the triggers evaluated from the shims' statistics (golden, growth)."""
