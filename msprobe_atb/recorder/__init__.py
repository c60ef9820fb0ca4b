"""The flight recorder's control-plane side: the trigger command, and the triggers
evaluated from the shims' statistics (golden, growth)."""
