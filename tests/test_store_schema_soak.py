"""The store read whole with a column that first appears in a later part, the server's memory over a live
follow (the soak), and the named chart layouts file kept to its cap."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from regime_dash.follow.follower import FollowSet
from regime_dash.store.run_store import RunStore

ROOT = Path(__file__).resolve().parents[1]
LATE = "late_metric"


def diag_line(i: int, late: bool = False) -> str:
    o: dict = {"step": i, "risk_stack": {"regime": {"dead_zone": {"duration": float(i)}}}}
    if late:
        o[LATE] = i * 0.5
    return json.dumps(o) + "\n"


def follow_with_late_column(store, src: Path, name: str = "job") -> None:
    """A followed run whose first 50 lines lack ``late_metric`` and whose next 30 carry it: two parts."""
    src.write_text("".join(diag_line(i) for i in range(50)))
    fset = FollowSet(store, [src], name, commit_every=0)
    fset.poll(force=True)
    with open(src, "a") as fh:
        fh.write("".join(diag_line(i, late=True) for i in range(50, 80)))
    fset.poll(force=True)
    fset.poll(force=True)
    for f in fset.followers.values():
        f.close()


def readme_reads() -> str:
    """README's block of whole-store reads, as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"```python\n(schema = pyarrow\.parquet\.read_schema\(.*?)```", text, re.S)
    assert m, "README lost its block of whole-store reads"
    return m.group(1)


def test_a_later_parts_new_column_reads_through_readmes_calls(tmp_path):
    root = tmp_path / "store"
    store = RunStore(root)
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    # a second run (sorting first) lacking the column: the first file is not the one with it
    (tmp_path / "a.jsonl").write_text("".join(diag_line(i) for i in range(10)))
    store.ingest(tmp_path / "a.jsonl", name="a")
    parts = sorted(root.glob("run=*/part-*.parquet"))
    assert len(parts) >= 3 and LATE not in pq.read_schema(parts[0]).names

    import duckdb
    import pandas
    import polars
    import pyarrow
    import pyarrow.parquet  # noqa: F401  (README's block names it)

    ns: dict = {"pandas": pandas, "pyarrow": pyarrow, "duckdb": duckdb, "polars": polars}
    exec(readme_reads().replace('"data/store', f'"{root}').replace("'data/store", f"'{root}"), ns)
    late_of = {"job": 30, "a": 0}
    df = ns["df"]
    assert len(df) == 90 and int(df[LATE].notna().sum()) == 30
    assert df.loc[df[LATE].notna(), "step"].min() == 50
    table = ns["table"]
    assert table.num_rows == 90 and table.column(LATE).null_count == 60
    got = ns["rel"].aggregate(f"count({LATE}), count(*)").fetchall()
    assert got == [(30, 90)]
    pl_counts = ns["lf"].select(polars.col(LATE).count(), polars.len()).collect().row(0)
    assert pl_counts == (30, 90)
    by_run = df.groupby(df["run"].astype(str).str.split("-").str[0])[LATE].count().to_dict()
    assert by_run == late_of


def test_the_schema_file_is_rebuilt_where_missing_and_never_loses_a_column(tmp_path):
    from regime_dash.store import common_schema

    root = tmp_path / "store"
    store = RunStore(root)
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    (root / common_schema.FILE).unlink()
    (tmp_path / "b.jsonl").write_text("".join(diag_line(i) for i in range(5)))
    store.ingest(tmp_path / "b.jsonl", name="b")  # rebuilt from every footer, the new run's joined
    assert LATE in pq.read_schema(root / common_schema.FILE).names
    assert not list(root.glob(".*tmp")), "the schema file's temporary copy was left behind"


def test_the_delta_store_merges_a_later_commits_new_column(tmp_path):
    import deltalake
    import polars

    from regime_dash.store.open import open_delta_store

    store = open_delta_store(tmp_path / "dstore")
    follow_with_late_column(store, tmp_path / "job.diag.jsonl")
    rows = str(tmp_path / "dstore" / "rows")
    df = deltalake.DeltaTable(rows).to_pandas()  # README's read of the Delta tables
    assert len(df) == 80 and int(df[LATE].notna().sum()) == 30
    assert polars.read_delta(rows).select(polars.col(LATE).count()).item() == 30
    assert deltalake.DeltaTable(rows).to_pyarrow_dataset().to_table().column(LATE).null_count == 50
