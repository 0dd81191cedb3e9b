"""The one compiled part: the shape scanner's loops (optional: without a C compiler the
package installs all the same, and ingest loads the numba scanner instead)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("regime_dash.ingest._shape_scan", ["regime_dash/ingest/_shape_scan.c"],
                             optional=True)])
