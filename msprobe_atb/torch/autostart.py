"""`msprobe-atb run --torch`: a Dumper for a plain script that never imports us.

The run puts torch/startup/ first on PYTHONPATH, so Python imports its
sitecustomize at start-up, which calls `install()`. Nothing is imported then: an
import hook waits for the script's own `import torch`, then wraps
`torch.nn.Module.__call__`. The first module called from outside any module's
forward that holds parameters (`model.generate(...)`, `model(ids)`) is the top
module: a Dumper is started on it before that call runs, with the run's output and
config, the wrapper is removed (later calls cost only the hooks), and the Dumper is
closed at interpreter exit, which writes the exit record and the derived files."""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

ENV_OUTPUT = "MSPROBE_ATB_TORCH_OUTPUT"
ENV_CONFIG = "MSPROBE_ATB_TORCH_CONFIG"
STARTUP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")


def env_for(output: str, config: str, base: dict[str, str]) -> dict[str, str]:
    """`base` with what the script's Python needs to start the dumper."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = [STARTUP_DIR, package_root] + [p for p in base.get("PYTHONPATH", "").split(":") if p]
    return {**base, "PYTHONPATH": ":".join(path), ENV_OUTPUT: output, ENV_CONFIG: config}


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds `torch` as the other finders do, and patches it once it has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _wrap_call(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    if "torch" in sys.modules:
        _wrap_call(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorchImport())


def _wrap_call(torch) -> None:
    module_cls = torch.nn.Module
    original = module_cls.__call__
    depth = [0]
    started = [False]  # callers may hold this wrapper (generate keeps `self.__call__`)

    def __call__(self, *args, **kwargs):
        if started[0]:
            return original(self, *args, **kwargs)
        if depth[0] == 0 and next(self.parameters(), None) is not None:
            started[0] = True
            module_cls.__call__ = original
            _start(self)
            return original(self, *args, **kwargs)
        depth[0] += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    module_cls.__call__ = __call__


def _start(model) -> None:
    """Starts the Dumper on `model`; a failure is said and the script runs on undumped."""
    try:
        from msprobe_atb.torch.dumper import Dumper

        dumper = Dumper(model, output=os.environ[ENV_OUTPUT], config=os.environ[ENV_CONFIG])
        dumper.start()
    except Exception as exc:  # a refused config, a missing package, an unwritable output
        print(f"[msprobe-atb] the torch dumper did not start, nothing is dumped: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return
    atexit.register(dumper.close)


def chain_sitecustomize(own_dir: str) -> None:
    """Runs the `sitecustomize` that ours shadows (the first one further on sys.path)."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != own_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
