"""Two things pyproject.toml cannot say alone: the one compiled part, the shape scanner's
loops (optional: without a C compiler the package installs all the same, and ingest loads
the numba scanner instead), and the top-level ``kernels/`` folder mapped into the package
as ``regime_dash/kernels/`` (package data: the CUDA sources the engine's loader compiles)."""
from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["regime_dash*"]), "regime_dash.kernels"],
    package_dir={"regime_dash.kernels": "kernels"},
    ext_modules=[Extension("regime_dash.ingest._shape_scan", ["regime_dash/ingest/_shape_scan.c"],
                           optional=True)],
)
