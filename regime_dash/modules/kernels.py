"""Compiling a module's CUDA kernels through the engine's loader, with the module's slot defines."""
from __future__ import annotations

from typing import Sequence


def load_kernels(files: Sequence[str], defines: Sequence[str]):
    """Compile a module's ``kernels/<files>`` with its slot ``defines`` through the loader.

    The loader adds the regime layout's defines and the parity options
    (``--fmad=false``); the module's own ``-D`` options come on top.

    Raises
    ------
    EngineUnavailable
        No cupy or no CUDA device here.
    """
    from regime_dash.engine import loader

    return loader.load_module(files, options=(*loader.PARITY_OPTIONS, *defines))


def cuda_available() -> str | None:
    """None when module kernels can run here, else why not."""
    from regime_dash.engine import loader

    return loader.available()



__all__ = ["cuda_available", "load_kernels"]
