"""Load the CUDA kernels of ``kernels/`` into CuPy modules.

One small loader serves every kernel. It reads the ``.cu`` files, prepends
``#line 1 "kernels/<file>"`` to each so that a compiler error cites the real
file and line, compiles the lot as one NVRTC translation unit with CuPy's
``RawModule``, and caches the module by (sha256 of the sources and headers,
defines, options). Slot indices reach the kernels only as the registry's
``-D`` defines (:meth:`SlotLayout.defines`), plus the summary's snapshot
positions (:data:`regime_dash.engine.summary.DEFINES`).

CuPy is imported lazily, inside functions: importing this module (and so
``import regime_dash``) never needs cupy. :func:`available` says why the CUDA
engines cannot run here without raising; :func:`load_module` raises
:class:`~regime_dash.errors.EngineUnavailable` on a machine with no cupy or no
device, and :class:`~regime_dash.errors.KernelCompileError` with the compiler
log when NVRTC rejects the source.
"""
from __future__ import annotations

import ctypes
import hashlib
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from regime_dash.engine import summary
from regime_dash.errors import EngineUnavailable, KernelCompileError
from regime_dash.core.slots import DEFAULT_LAYOUT, SlotLayout



def _kernel_dir() -> Path:
    """The checkout's top-level ``kernels/``, else the wheel's copy (package data ``regime_dash/kernels/``).

    A real directory either way, since nvcc and NVRTC take it as an ``-I`` path.
    """
    checkout = Path(__file__).resolve().parents[2] / "kernels"
    if (checkout / "common.cuh").is_file():
        return checkout
    return Path(str(resources.files("regime_dash").joinpath("kernels")))


#: The kernels directory: ``kernels/`` of a checkout, or the installed package's data.
KERNEL_DIR = _kernel_dir()
#: How the ``#line`` directives and errors name a kernel file.
SOURCE_PREFIX = "kernels/"
#: Headers every kernel may include; part of every cache key.
HEADERS: tuple[str, ...] = ("common.cuh", "regime_step.cuh", "replay_inputs.cuh")
#: Options of the parity builds: no FMA contraction, so every ``a * b + c`` is
#: a rounded multiply then a rounded add, like the NumPy reference. NVRTC's
#: defaults already give IEEE-rounded division and sqrtf (``-prec-div``,
#: ``-prec-sqrt``) and keep denormals (no ``-ftz``).
PARITY_OPTIONS: tuple[str, ...] = ("--fmad=false",)

_MODULES: dict[tuple, "Module"] = {}


def kernel_files() -> list[str]:
    """Names of every ``.cu`` file in :data:`KERNEL_DIR`, sorted."""
    return sorted(p.name for p in KERNEL_DIR.glob("*.cu"))


def _read(name: str) -> str:
    path = KERNEL_DIR / name
    if not path.is_file():
        raise KernelCompileError(f"kernel file {SOURCE_PREFIX}{name} does not exist", kernel=name)
    return path.read_text(encoding="utf-8")


def source_text(files: Sequence[str]) -> str:
    """The translation unit: each file's text after ``#line 1 "kernels/<file>"``."""
    parts = []
    for name in files:
        parts.append(f'#line 1 "{SOURCE_PREFIX}{name}"\n{_read(name)}\n')
    return "".join(parts)


def source_hash(files: Sequence[str]) -> str:
    """sha256 over the headers and ``files``, names included."""
    h = hashlib.sha256()
    for name in (*HEADERS, *files):
        h.update(name.encode())
        h.update(b"\0")
        h.update(_read(name).encode())
        h.update(b"\0")
    return h.hexdigest()


def defines(layout: SlotLayout = DEFAULT_LAYOUT) -> list[str]:
    """Every ``-D`` option a kernel compiles with.

    The registry's slot indices and ISV size (:meth:`SlotLayout.defines`), the
    summary's snapshot positions (:data:`summary.DEFINES`), and, for code that
    keeps the ISV in registers (``replay_scan.cu``), the same registry as lists:
    ``ISV_SLOT_LIST`` = ``X(i)`` for every slot index, ``SNAP_SLOT_<j>`` = the
    slot of diag snapshot column j, ``N_SNAP`` and ``SNAP_SLOT_LIST`` = ``S(j)``
    for every column. The lists hold no commas, since nvcc splits ``-D``
    values at commas.
    """
    from regime_dash.engine.start import snapshot_indices

    snap = [int(i) for i in snapshot_indices(layout)]
    slot_list = "".join(f"X({i})" for i in sorted({s.index for s in layout.slots}))
    return (list(layout.defines()) + list(summary.DEFINES)
            + [f"-DISV_SLOT_LIST={slot_list}", f"-DN_SNAP={len(snap)}",
               "-DSNAP_SLOT_LIST=" + "".join(f"S({j})" for j in range(len(snap)))]
            + [f"-DSNAP_SLOT_{j}={i}" for j, i in enumerate(snap)])


def nvcc_ptx_command(name: str, layout: SlotLayout = DEFAULT_LAYOUT, arch: str = "sm_90",
                     options: Sequence[str] = PARITY_OPTIONS, output: str = "-") -> list[str]:
    """The ``nvcc --ptx`` command line that compiles ``kernels/<name>`` like the loader does."""
    return ["nvcc", "--ptx", f"-arch={arch}", *options, f"-I{KERNEL_DIR}", *defines(layout),
            "-o", output, str(KERNEL_DIR / name)]


#: The NVIDIA driver's library on Linux. cupy loads it too, so where it cannot be loaded no
#: device can run, and cupy's import (a few tenths of a second) is spared.
DRIVER_LIBRARY = "libcuda.so.1"


def _driver_problem() -> str | None:
    """Why the NVIDIA driver cannot be loaded here, else None (and None off Linux, where
    cupy's own probe answers): a millisecond's ``dlopen`` before importing cupy."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError as exc:
        return f"no NVIDIA driver ({exc})"
    return None


def available() -> str | None:
    """None when the CUDA engines can run here, else why not (never raises)."""
    problem = _driver_problem()
    if problem is not None:
        return problem
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken install raising anything
        return f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError without a driver
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    if n < 1:
        return "no CUDA device (cupy sees 0 devices)"
    return _compile_problem()


#: Why a device that is present cannot compile, once probed (the probe runs once a process).
_COMPILE_PROBE: list[str | None] = []
#: What the probe compiles: no headers, so only NVRTC itself is tested.
_PROBE_SOURCE = 'extern "C" __global__ void regime_dash_probe(float* x) { x[0] = 1.0f; }'


def _compile_problem() -> str | None:
    """None when NVRTC compiles here, else what is missing, in words (a GPU is present).

    cupy from the registry brings NVRTC only with its ``ctk`` extra, so a machine with the
    driver and no CUDA toolkit has a device that cannot build the kernels.
    """
    if not _COMPILE_PROBE:
        import cupy

        try:
            cupy.RawModule(code=_PROBE_SOURCE).compile()
            _COMPILE_PROBE.append(None)
        except Exception as exc:  # NVRTC missing (OSError, RuntimeError, ...) or rejecting
            _COMPILE_PROBE.append(
                "GPU found but NVRTC cannot compile: pip install -r requirements-gpu.txt "
                "(cupy-cuda12x[ctk], the CUDA toolkit's compiler) or install a CUDA 12 toolkit "
                f"({type(exc).__name__}: {str(exc)[:200]})")
    return _COMPILE_PROBE[0]


def cupy_module() -> Any:
    """The ``cupy`` module, or :class:`EngineUnavailable` saying why it cannot be used."""
    reason = available()
    if reason is not None:
        raise EngineUnavailable(f"the CUDA engines cannot run here: {reason}", engine="cuda")
    import cupy

    return cupy


class Module:
    """A compiled set of kernels; ``module[name]`` is the ``cupy.RawKernel``."""

    def __init__(self, raw: Any, files: tuple[str, ...], key: tuple):
        self._raw = raw
        self.files = files
        self.key = key
        self._kernels: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._kernels:
            self._kernels[name] = self._raw.get_function(name)
        return self._kernels[name]


def load_module(files: Sequence[str], layout: SlotLayout = DEFAULT_LAYOUT,
                options: Sequence[str] = PARITY_OPTIONS) -> Module:
    """Compile ``kernels/<files>`` as one module (cached) and return it.

    Parameters
    ----------
    files
        ``.cu`` file names under ``kernels/``.
    layout
        Slot layout whose indices the kernels compile with.
    options
        Extra NVRTC options (default :data:`PARITY_OPTIONS`).

    Raises
    ------
    EngineUnavailable
        No cupy or no CUDA device here.
    KernelCompileError
        NVRTC rejected the source; ``.log`` holds its log, citing ``kernels/<file>:<line>``.
    """
    cupy = cupy_module()
    files = tuple(files)
    opts = tuple(options)
    key = (source_hash(files), tuple(defines(layout)), opts)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    code = source_text(files)
    all_opts = (*opts, f"-I{KERNEL_DIR}", *defines(layout))
    try:
        raw = cupy.RawModule(code=code, options=all_opts)
        raw.compile()
    except cupy.cuda.compiler.CompileException as exc:
        log = str(exc)
        raise KernelCompileError(f"NVRTC rejected {', '.join(files)}:\n{log}",
                                 kernel=",".join(files), log=log) from None
    mod = Module(raw, files, key)
    _MODULES[key] = mod
    return mod
