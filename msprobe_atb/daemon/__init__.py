"""The per-output-dir control plane: watch the config, publish, drain records."""
