"""``--out FILE.parquet`` of ``replay``: the frame's bits back through pandas and DuckDB, dictionary pages
only where a column's values repeat."""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from regime_dash import replay
from regime_dash.sources import scenarios
from regime_dash.usecases.frames import dictionary_columns, write_frame as write


def _encodings(path) -> dict[str, tuple[str, ...]]:
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}


def test_parquet_out_keeps_every_bit_and_reads_in_duckdb(tmp_path):
    frame = replay(scenarios.make("kelly_trap_run8", steps=5000, accounts=16), engine="reference", log_inputs=True)
    out = write(frame, tmp_path / "run.parquet")
    got = pd.read_parquet(out)
    assert list(got.columns) == list(frame.columns) and list(got.dtypes) == list(frame.dtypes)
    for col in frame.columns:
        e, g = frame[col].to_numpy(), got[col].to_numpy()
        if e.dtype.kind == "f":  # bit for bit, NaN payloads and signed zeros included
            assert np.array_equal(e.view(np.uint32 if e.dtype == np.float32 else np.uint64),
                                  g.view(np.uint32 if g.dtype == np.float32 else np.uint64)), col
        else:
            assert np.array_equal(e, g), col
    [(rows, folds, kelly)] = duckdb.sql(f"SELECT count(*), count(DISTINCT fold), sum(\"risk_stack.kelly.fraction\") "
                                        f"FROM '{out}'").fetchall()
    assert rows == len(frame) and folds == frame["fold"].nunique()
    assert np.isclose(kelly, frame["risk_stack.kelly.fraction"].astype(np.float64).sum())
    enc = _encodings(out)
    assert "RLE_DICTIONARY" in enc["phase"] and "RLE_DICTIONARY" in enc["fold"]
    assert "RLE_DICTIONARY" not in enc["step"]  # a new value every row
    assert "RLE_DICTIONARY" not in enc["risk_stack.kelly.fraction"]


def test_dictionary_columns_are_the_repeating_non_floats():
    n = 10_000
    frame = pd.DataFrame({"step": np.arange(n), "fold": np.repeat(np.arange(4, dtype=np.int32), n // 4),
                          "phase": pd.Series(["train", "eval"] * (n // 2)),
                          "slot": np.zeros(n, dtype=np.float32), "ids": np.arange(n).astype(str)})
    assert dictionary_columns(frame) == ["fold", "phase"]
