"""``python -m regime_dash.ui.upload_probe STORE FILE``: upload one file through the Runs page.

Streamlit's AppTest runs the real app and its Runs page in this process, which hands
FILE to the page's uploader (streamlit gives the page an ``UploadedFile``, as a browser
upload does) into the store STORE, then prints what the page shows: exceptions, the
ingest report expanders, errors. The ingest benchmark and the hostile-input tests run
it as a child process to measure the peak memory of the app's upload path.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    store, path = (argv if argv is not None else sys.argv[1:])[:2]
    os.environ["REGIME_DASH_STORE"] = store
    from streamlit.testing.v1 import AppTest

    app = Path(__file__).resolve().parents[2] / "app.py"
    at = AppTest.from_file(str(app), default_timeout=3600).run()
    with open(path, "rb") as fh:
        data = fh.read()
    at.file_uploader(key="runs.upload").set_value((os.path.basename(path), data, "application/gzip")).run()
    del data
    print("EXC", [e.message for e in at.exception])
    print("EXPANDERS", [e.label for e in at.expander])
    print("ERRORS", [e.value for e in at.error])
    return 0


if __name__ == "__main__":
    sys.exit(main())
