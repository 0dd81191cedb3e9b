"""Every kernels/*.cu compiles with ``nvcc --ptx -arch=sm_90`` and the registry's defines.

These need nvcc, not a GPU: they run wherever nvcc is on PATH (CI runs on a
machine with the CUDA toolkit) and skip, saying so, where it is absent. The
loader's own plumbing (#line, cache key, the device-less error) is checked
here too, without a device.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from regime_dash.engine import loader
from regime_dash.modules import kernel_defines
from regime_dash.errors import EngineUnavailable
from regime_dash.core.slots import DEFAULT_LAYOUT

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (CUDA toolkit absent)")

SPEC_KERNELS = (
    "rl_regime_flat_count", "rl_regime_observer", "rl_kelly_fraction_controller",
    "rl_iqn_action_tau_controller", "rl_popart_normalize", "rl_popart_v_correct",
    "eval_warmup_decay", "reset_session_state",
)
FAST_KERNELS = ("replay_step_stats", "replay_scan", "replay_normalize")


def _ptx(name: str, tmp_path, layout=DEFAULT_LAYOUT) -> str:
    out = tmp_path / (name + ".ptx")
    # controller modules' kernels (regime_dash.modules) add their own slot defines
    options = (*loader.PARITY_OPTIONS, *kernel_defines(name))
    cmd = loader.nvcc_ptx_command(name, layout, options=options, output=str(out))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out.read_text()


def test_every_spec_and_fast_kernel_has_its_file():
    files = set(loader.kernel_files())
    for name in SPEC_KERNELS + FAST_KERNELS:
        assert f"{name}.cu" in files
    for header in loader.HEADERS:
        assert (loader.KERNEL_DIR / header).is_file()


@needs_nvcc
@pytest.mark.parametrize("name", loader.kernel_files())
def test_kernel_compiles_to_ptx_for_sm90(name, tmp_path):
    ptx = _ptx(name, tmp_path)
    assert ".target sm_90" in ptx
    assert ".entry" in ptx  # at least one __global__ made it into the module


@needs_nvcc
def test_slot_indices_come_from_the_defines(tmp_path):
    # Moving a slot in the layout moves the kernel's ISV offset: no index is baked in.
    name = "RL_REGIME_DEAD_ZONE_FLAG_INDEX"
    moved = DEFAULT_LAYOUT.with_indices({name: 900})
    default = _ptx("rl_regime_observer.cu", tmp_path)
    other = _ptx("rl_regime_observer.cu", tmp_path, moved)
    assert f"+{696 * 4}]" in default and f"+{900 * 4}]" not in default
    assert f"+{900 * 4}]" in other and f"+{696 * 4}]" not in other


def test_no_kernel_hard_codes_a_slot_number():
    literal = re.compile(r"isv\s*\[\s*\d")
    for name in loader.kernel_files() + list(loader.HEADERS):
        text = (loader.KERNEL_DIR / name).read_text()
        assert not literal.search(text), f"kernels/{name} indexes the ISV with a literal"


def test_source_text_prepends_line_directives():
    text = loader.source_text(["rl_regime_observer.cu", "eval_warmup_decay.cu"])
    assert text.startswith('#line 1 "kernels/rl_regime_observer.cu"\n')
    assert '\n#line 1 "kernels/eval_warmup_decay.cu"\n' in text


@needs_nvcc
def test_compile_errors_cite_the_kernel_file_and_line(tmp_path, monkeypatch):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    for header in loader.HEADERS:
        shutil.copy(loader.KERNEL_DIR / header, kdir / header)
    (kdir / "broken.cu").write_text('#include "regime_step.cuh"\n\n'
                                    'extern "C" __global__ void k(float* isv) { isv[0] = undeclared_name; }\n')
    monkeypatch.setattr(loader, "KERNEL_DIR", kdir)
    unit = tmp_path / "unit.cu"
    unit.write_text(loader.source_text(["broken.cu"]))
    proc = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", f"-I{kdir}", *loader.defines(),
                           "-o", str(tmp_path / "x.ptx"), str(unit)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "kernels/broken.cu(3)" in proc.stderr, proc.stderr


def test_source_hash_covers_headers_and_files(tmp_path, monkeypatch):
    a = loader.source_hash(["rl_regime_observer.cu"])
    assert a == loader.source_hash(["rl_regime_observer.cu"])
    assert a != loader.source_hash(["eval_warmup_decay.cu"])
    kdir = tmp_path / "kernels"
    shutil.copytree(loader.KERNEL_DIR, kdir)
    monkeypatch.setattr(loader, "KERNEL_DIR", kdir)
    assert loader.source_hash(["rl_regime_observer.cu"]) == a
    (kdir / "common.cuh").write_text((kdir / "common.cuh").read_text() + "\n// edit\n")
    assert loader.source_hash(["rl_regime_observer.cu"]) != a


def test_load_module_without_a_device_raises_engine_unavailable():
    reason = loader.available()
    if reason is None:
        pytest.skip("a CUDA device is present here; this checks the device-less error")
    with pytest.raises(EngineUnavailable, match="cannot run here"):
        loader.load_module(["rl_regime_observer.cu"])


@pytest.mark.slow  # a fresh interpreter
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the driver probe is Linux's libcuda.so.1")
def test_without_a_loadable_driver_available_says_so_and_never_imports_cupy(monkeypatch):
    code = ("import sys; from regime_dash.engine import loader; "
            "loader.DRIVER_LIBRARY = 'libregime_dash_no_such_driver.so.1'; "
            "print(loader.available()); print('cupy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    reason, imported = proc.stdout.splitlines()
    assert reason.startswith("no NVIDIA driver (") and "libregime_dash_no_such_driver.so.1" in reason
    assert imported == "False"
    monkeypatch.setattr(loader, "DRIVER_LIBRARY", "libregime_dash_no_such_driver.so.1")
    with pytest.raises(EngineUnavailable, match="no NVIDIA driver"):
        loader.cupy_module()
