"""Dump config: schema, validation, loading, compilation to the control block."""

from msprobe_atb.config.compile import ASLEEP, CompiledConfig, compile_config
from msprobe_atb.config.loader import ConfigMissing, load_bytes, load_config, read_bytes
from msprobe_atb.config.schema import Config, ConfigError, validate

__all__ = [
    "ASLEEP", "CompiledConfig", "Config", "ConfigError", "ConfigMissing", "compile_config",
    "load_bytes", "load_config", "read_bytes", "validate",
]
