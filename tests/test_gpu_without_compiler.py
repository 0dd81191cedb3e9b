"""A GPU that cannot compile: the driver and a device, but no NVRTC (cupy from the registry
without its ``ctk`` extra). The engines say in words what is missing and the work goes on
on the CPU.

The child process has the real device; only NVRTC is taken away, by making cupy's
``RawModule`` fail the way a missing ``libnvrtc`` does (the probe's first compile), since a
driver-only machine cannot be made from one that has the toolkit.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHILD = r"""
import json, cupy
def no_nvrtc(*args, **kwargs):
    raise OSError("libnvrtc.so.12: cannot open shared object file: No such file or directory")
cupy.RawModule = no_nvrtc
from regime_dash.engine import engine_status, resolve_engine, replay
from regime_dash.errors import EngineUnavailable
from regime_dash.sources.scenarios import kelly_trap_run8
status = engine_status()
stream = kelly_trap_run8(seed=1, steps=2000, accounts=4)
try:
    replay(stream, engine="cuda")
    cuda_error = None
except EngineUnavailable as exc:
    cuda_error = str(exc)
frame = replay(stream, engine="auto")
print(json.dumps({"devices": cupy.cuda.runtime.getDeviceCount(), "status": status,
                  "auto": resolve_engine("auto"), "cuda_error": cuda_error,
                  "rows": int(len(frame))}))
"""


@pytest.mark.gpu
def test_a_gpu_without_nvrtc_says_what_is_missing_and_replays_on_the_cpu():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["devices"] >= 1  # a real device is there: the words are about the compiler
    reason = out["status"]["cuda"]
    assert "NVRTC cannot compile" in reason and "requirements-gpu.txt" in reason
    assert "libnvrtc.so.12" in reason  # the loader's own error, quoted
    assert "NVRTC cannot compile" in out["cuda_error"] and "requirements-gpu.txt" in out["cuda_error"]
    assert out["auto"] in ("fast", "reference") and out["rows"] == 2000
