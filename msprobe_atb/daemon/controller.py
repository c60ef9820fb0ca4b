"""The sleep/wake state machine: turns config file states into publishes.

* no file, or a file that was never valid: asleep;
* a valid file: published as compiled (asleep when dump_enable is false);
* an invalid edit: the last good config stays in force; the error is logged
  once and put in the block, where the shims print it and `status` shows it;
  the next good edit clears it;
* the last good config survives a restart of the daemon (lastgood.py): a fresh
  daemon that finds the file rejected publishes it rather than asleep.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from msprobe_atb.config.compile import ASLEEP, STATE_NAMES, CompiledConfig, compile_config
from msprobe_atb.config.loader import load_bytes
from msprobe_atb.config.schema import Config, ConfigError
from msprobe_atb.tree import lastgood

log = logging.getLogger("msprobe_atb")


def summary(cfg: Config) -> str:
    parts = [f"task {cfg.task}", f"exec_range {cfg.exec_range}"]
    if cfg.ids:
        parts.append(f"ids {','.join(cfg.ids)}")
    if cfg.op_name:
        parts.append(f"op_name {','.join(cfg.op_name)}")
    if cfg.save_child:
        parts.append(f"save_child, filter_level {cfg.filter_level}")
    if cfg.device:
        parts.append(f"device {','.join(map(str, cfg.device))}")
    if cfg.save_all_stages:
        parts.append("all four stages")
    return ", ".join(parts)


class Controller:
    def __init__(self, block, config_path: Path | None):
        self.block = block
        self.config_path = config_path
        self.good: Config | None = None
        self.published: CompiledConfig | None = None
        self.error = ""
        self._golden: tuple[Path, object] | None = None
        self._armed = None  # the recorder block of the arming in force
        self.armed_ns = 0  # when it was published

    def golden_of(self, cfg: Config | None):
        """The golden statistics of the recorder's golden trigger (a path relative
        to the config file's directory), loaded once per path; None without one.
        Raises ConfigError when they cannot be read: validate_golden judges, as
        for `msprobe-atb check`."""
        from msprobe_atb.config.golden import validate_golden

        loaded = validate_golden(cfg, self.config_path, self._golden)
        if loaded is None:
            return None
        if loaded is not self._golden:
            self._golden = loaded
            log.info("recorder: golden statistics from %s", loaded[0])
        return loaded[1]

    def _arming(self, compiled: CompiledConfig) -> CompiledConfig:
        """The recorder's incident count starts again (and the shims drop their
        rings) when it is armed or its block changes; other edits keep both."""
        if not compiled.rec_armed:
            self._armed = None
            return compiled
        rec = self.good.recorder if self.good is not None else None
        old = self.published
        if old is not None and old.rec_armed and self._armed == rec:
            base, arming = old.rec_incident_base, old.rec_arming
        else:
            base = self.block.rec_claimed
            arming = (self.block.read_config()[1].rec_arming + 1) & 0xFFFFFFFF
            self.armed_ns = time.time_ns()
        self._armed = rec
        return dataclasses.replace(compiled, rec_incident_base=base, rec_arming=arming)

    def _publish(self, compiled: CompiledConfig, why: str) -> None:
        compiled = self._arming(compiled)
        if compiled == self.published:
            return
        old = "none" if self.published is None else STATE_NAMES[self.published.state]
        self.block.publish(compiled)
        self.published = compiled
        log.info("published config (generation %d): %s -> %s; %s", self.block.generation, old,
                 STATE_NAMES[compiled.state], why)

    def _publish_config(self, cfg: Config, why: str) -> None:
        """Publishes a valid config. exec_range "next" gets a new request number, which
        each shim turns into its own rounds, per model, at the first execution of that
        model it sees begin from then on (models.c)."""
        compiled = compile_config(cfg)
        if not compiled.next_count or not cfg.dump_enable:
            self._publish(compiled, why)
            return
        old = self.block.read_config()[1]
        if (self.published is None and self.block.published and old.state == 1
                and old.next_request and old.next_count == compiled.next_count):
            # a restarted control plane: the request an earlier one published stays in force
            request = old.next_request
        else:
            # never one a shim has seen: its models keep their rounds across a new block
            request = max(time.time_ns(), old.next_request + 1)
        self._publish(dataclasses.replace(compiled, next_request=request), why)
        log.info("exec_range next:%d (request %d): each process dumps the next %d "
                 "execution(s) of each model from its next begin, and says which rounds",
                 compiled.next_count, request, compiled.next_count)

    def _set_error(self, message: str) -> None:
        if message != self.error:
            self.error = message
            self.block.set_error(message)

    def missing(self) -> None:
        """The config file does not exist (or none was given): asleep."""
        self.good = None
        if self.config_path is not None:
            lastgood.remove(self.block.dump_root)
        self._set_error("")
        where = self.config_path or "(no config file given)"
        self._publish(ASLEEP, f"config file {where} does not exist")

    def refuse(self, problem: str) -> None:
        """The config path holds something that is not a file to read."""
        self._reject(ConfigError(str(self.config_path or "config"), [problem]))

    def _reject(self, exc: ConfigError) -> None:
        restored = False
        if self.published is None and self.config_path is not None:
            # A fresh daemon: the config an earlier one had in force stays in force.
            self.good = lastgood.load(self.block.dump_root, self.config_path)
            restored = self.good is not None
        if str(exc) != self.error:
            keep = ("keeping the last good config, kept by the previous control plane"
                    if restored else "keeping the previous config" if self.good is not None
                    else "staying asleep: no valid config yet")
            log.error("config rejected, %s: %s", keep, exc)
        self._set_error(str(exc))
        if self.published is None:
            if self.good is None:
                self._publish(ASLEEP, "no valid config yet")
            else:
                self._publish_config(self.good, f"the last good config, kept across the "
                                                f"restart: {summary(self.good)}")

    def apply(self, data: bytes) -> None:
        source = str(self.config_path or "config")
        try:
            cfg = load_bytes(data, source)
        except ConfigError as exc:
            self._reject(exc)
            return
        except Exception as exc:  # a validation bug must not cost the daemon
            log.exception("internal error while validating %s", source)
            self._reject(ConfigError(source, [f"internal error while validating "
                                              f"({type(exc).__name__}; a bug in msprobe-atb, "
                                              "details in daemon.log); fix or revert the edit"]))
            return
        try:
            self.golden_of(cfg)
        except ConfigError as exc:
            self._reject(exc)
            return
        self.good = cfg
        if self.config_path is not None:
            lastgood.save(self.block.dump_root, self.config_path, data)
        if self.error:
            log.info("config accepted again; the previous error is cleared")
        self._set_error("")
        state = "dump_enable true" if cfg.dump_enable else "dump_enable false"
        self._publish_config(cfg, f"{state}: {summary(cfg)}")
