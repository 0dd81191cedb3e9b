"""The Compare page under AppTest with four runs: more runs overlaid, A − B of the pair, the runs grouped.

The store holds two configs (max_duration 500 and 200) of the tail_shock scenario, three and
two seeds, of unequal lengths, tagged ``cfg=…`` and ``seed=…``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from regime_dash import RegimeConfig, replay  # noqa: E402
from regime_dash.sources import scenarios
from regime_dash.diag import catalogue as diag
from regime_dash.analysis import diff_runs  # noqa: E402
from regime_dash.store.run_store import RunStore  # noqa: E402
from regime_dash.store.labels import tag  # noqa: E402
from regime_dash.text import markdown_literal  # noqa: E402
from test_app_pages import drawn_in_place, no_exception, open_page, values  # noqa: E402

#: (name, max_duration, seed, steps)
RUNS = (("a-s0", 500.0, 0, 300), ("a-s1", 500.0, 1, 240), ("a-s2", 500.0, 2, 280), ("b-s0", 200.0, 0, 300),
        ("b-s1", 200.0, 1, 260))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, dict[str, str], dict]:
    """The store, ``{name: run_id}`` and ``{name: frame}`` as replayed."""
    root = tmp_path_factory.mktemp("compare") / "store"
    rs = RunStore(root)
    ids, frames = {}, {}
    for name, max_duration, seed, steps in RUNS:
        frame = replay(scenarios.make("tail_shock", seed=seed, steps=steps, accounts=16),
                       RegimeConfig(max_duration=max_duration), engine="reference")
        path = diag.write_jsonl(frame, root.parent / f"{name}.jsonl")
        ids[name] = rs.ingest(path, name=name).run_id
        tag(rs, ids[name], [f"cfg={name[0]}", f"seed={seed}"])
        frames[name] = frame
    return root, ids, frames


def open_compare(store, monkeypatch, **params) -> AppTest:
    return open_page(store[0], monkeypatch, "compare", **params)


def chart(at: AppTest, key: str) -> dict:
    return drawn_in_place(at)[key]["figure"]


def test_more_runs_are_overlaid_one_colour_each_and_smoothing_redraws_them(store, monkeypatch):
    _, ids, _ = store
    at = open_compare(store, monkeypatch)
    assert len([t for t in chart(at, "compare.chart")["data"] if t.get("showlegend")]) == 2
    at.multiselect(key="compare.more").set_value(list(ids.values())).run()
    no_exception(at, "five runs")
    legend = [t for t in chart(at, "compare.chart")["data"] if t.get("showlegend")]
    assert sorted(t["name"] for t in legend) == sorted(ids)
    assert len({t["line"]["color"] for t in legend}) == len(ids)
    assert dict(at.query_params)["more"] in (",".join(ids.values()), [",".join(ids.values())])

    def sigma(name):
        (t,) = [t for t in chart(at, "compare.chart")["data"] if t.get("name") == f"{name} σ"]
        return values(t["y"])

    raw = sigma("b-s1")
    at.slider(key="compare.smoothing").set_value(0.9).run()
    no_exception(at, "smoothing")
    assert len(np.unique(raw)) > 2 and not np.array_equal(sigma("b-s1"), raw)


def test_the_difference_tab_draws_a_minus_b_and_marks_each_first_differing_step(store, monkeypatch):
    _, ids, frames = store
    at = open_compare(store, monkeypatch)
    at.selectbox(key="compare.a").set_value(ids["a-s0"])
    at.selectbox(key="compare.b").set_value(ids["b-s0"]).run()
    at.session_state["compare.tabs"] = "Difference A − B"
    at.run()
    no_exception(at, "difference tab")
    d = diff_runs(frames["a-s0"], frames["b-s0"])
    fig = chart(at, "compare.diff.chart")
    picked = at.multiselect(key="compare.diff.fields").value
    assert 0 < len(picked) <= 6
    firsts = {f.column: f.first_step for f in d.fields}
    assert all(firsts[c] is not None for c in picked)  # it starts on fields that differ
    marks = {t["name"]: t for t in fig["data"] if t["name"].endswith(" first difference")}
    assert {name.removesuffix(" first difference") for name in marks} == set(picked)
    for column in picked:
        assert marks[f"{column} first difference"]["x"] == [firsts[column]]
    (line,) = fig["layout"]["shapes"]
    assert line["x0"] == d.first_step
    (trace,) = [t for t in fig["data"] if t.get("mode") == "lines" and t["yaxis"] == "y"]
    col, x = picked[0], values(trace["x"]).astype(np.int64)  # the first panel; a flat stretch keeps its ends
    a, b = (frames[n].set_index("step")[col].astype(np.float64) for n in ("a-s0", "b-s0"))
    np.testing.assert_array_equal(values(trace["y"]).astype(np.float32), (a.loc[x] - b.loc[x]).to_numpy(np.float32))
    assert x.min() == 0 and x.max() == 299
    at.multiselect(key="compare.diff.fields").set_value([diag.KELLY]).run()
    no_exception(at, "one field")
    assert len([t for t in chart(at, "compare.diff.chart")["data"] if t.get("mode") == "lines"]) == 1


def test_a_pair_that_is_the_same_run_says_there_is_nothing_to_draw(store, monkeypatch):
    _, ids, _ = store
    at = open_compare(store, monkeypatch)
    at.selectbox(key="compare.b").set_value(at.selectbox(key="compare.a").value).run()
    at.session_state["compare.tabs"] = "Difference A − B"
    at.run()
    no_exception(at, "same run")
    assert at.multiselect(key="compare.diff.fields").value == []
    assert any("equal in every numeric field" in i.value for i in at.info)
    assert "compare.diff.chart" not in drawn_in_place(at)


def group_means(at: AppTest) -> dict[str, dict]:
    return {t["name"]: t for t in chart(at, "compare.group.chart")["data"]
            if t.get("mode") == "lines" and not t["name"].endswith(" band") and t["yaxis"] == "y"}


def test_groups_by_config_draw_each_groups_mean_over_its_band_step_aligned(store, monkeypatch):
    _, ids, frames = store
    at = open_compare(store, monkeypatch, more=",".join(ids.values()))
    at.session_state["compare.tabs"] = "Groups"
    at.run()
    no_exception(at, "groups tab")
    at.selectbox(key="compare.group_by").set_value("config:max_duration").run()
    at.multiselect(key="compare.group.fields").set_value([diag.SIGMA]).run()
    no_exception(at, "by max_duration")
    means = group_means(at)
    assert set(means) == {"max_duration=200 (2 runs)", "max_duration=500 (3 runs)"}
    a = means["max_duration=500 (3 runs)"]
    x = values(a["x"]).astype(np.int64)
    assert x.min() == 0 and x.max() == 299  # the longest seed's steps: 280..299 from that run alone
    seeds = pd.concat([frames[n].set_index("step")[diag.SIGMA].astype(np.float64) for n in ("a-s0", "a-s1", "a-s2")],
                      axis=1)
    np.testing.assert_allclose(values(a["y"]).astype(np.float64), seeds.mean(axis=1).loc[x].to_numpy(), rtol=1e-6)
    counts = values(a["customdata"])
    np.testing.assert_array_equal(counts, np.where(x < 240, 3, np.where(x < 280, 2, 1)))

    def band():
        (t,) = [t for t in chart(at, "compare.group.chart")["data"] if t["name"] == "max_duration=500 (3 runs) band"]
        return values(t["y"])

    minmax = band()
    at.radio(key="compare.band").set_value("sigma").run()
    no_exception(at, "sigma band")
    assert not np.array_equal(band(), minmax)
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert flat["group"] == "config:max_duration" and flat["band"] == "sigma"


def test_groups_by_tag_key_and_their_url_round_trip(store, monkeypatch):
    _, ids, _ = store
    at = open_compare(store, monkeypatch, more=",".join(ids.values()), group="tag:seed", band="sigma")
    at.session_state["compare.tabs"] = "Groups"
    at.run()
    no_exception(at, "from the URL")
    assert at.selectbox(key="compare.group_by").value == "tag:seed"
    assert at.radio(key="compare.band").value == "sigma"
    assert set(group_means(at)) == {"seed=0 (2 runs)", "seed=1 (2 runs)", "seed=2 (1 run)"}


def test_a_bad_group_in_the_url_is_named_and_dropped(store, monkeypatch):
    _, ids, _ = store
    at = open_compare(store, monkeypatch, more=ids["b-s1"], group="config:no_such_field", band="iqr")
    at.session_state["compare.tabs"] = "Groups"
    at.run()
    no_exception(at, "bad URL values")
    said = " ".join(w.value for w in at.warning)
    assert f"URL parameter group dropped: {markdown_literal(repr('config:no_such_field'))}" in said
    assert f"URL parameter band dropped: {markdown_literal(repr('iqr'))}" in said
    assert at.selectbox(key="compare.group_by").value == "tags"
    assert group_means(at)  # the default grouping is drawn


def test_groups_of_runs_without_tags_or_config_say_how_to_get_some(tmp_path, monkeypatch):
    import json

    root = tmp_path / "store"
    rs = RunStore(root)
    for k in range(2):
        path = tmp_path / f"plain{k}.jsonl"
        path.write_text("".join(json.dumps({"step": t, "risk_stack": {"kelly": {"fraction": 0.1 * k + t}}}) + "\n"
                                for t in range(20)))
        rs.ingest(path, name=f"plain{k}")
    at = open_compare((root, None, None), monkeypatch)
    at.session_state["compare.tabs"] = "Groups"
    at.run()
    no_exception(at, "nothing to group by")
    assert any("no tags and log no config" in i.value for i in at.info)



@pytest.fixture(scope="module")
def long_store(tmp_path_factory) -> tuple[Path, list[str]]:
    """Four runs long enough (1,500 steps) that each series is drawn downsampled, over its min/max band."""
    root = tmp_path_factory.mktemp("long") / "store"
    rs = RunStore(root)
    ids = []
    for seed in range(4):
        frame = replay(scenarios.make("tail_shock", seed=seed, steps=1500, accounts=4), RegimeConfig(),
                       engine="reference")
        ids.append(rs.ingest(diag.write_jsonl(frame, root.parent / f"l{seed}.jsonl"), name=f"l{seed}").run_id)
    return root, ids


@pytest.mark.parametrize("count", [3, 4])
def test_explore_overlays_many_runs_without_their_bands_as_compare_does(long_store, monkeypatch, count):
    """Up to three runs keep each series' min/max band; more are drawn as lines alone, and said so."""
    root, ids = long_store
    at = open_page(root, monkeypatch, "explore", runs=",".join(ids[:count]))
    (figure,) = [d["figure"] for k, d in drawn_in_place(at).items() if k.startswith("explore.chart.")]
    names = [str(t.get("name", "")) for t in figure["data"]]
    bands = [n for n in names if n.endswith(" min/max")]
    said = [c.value for c in at.caption if "without its min/max band" in c.value]
    assert len({n.split(" ")[0] for n in names if n.endswith(" kelly_f")}) == count  # every run drawn
    assert (bool(bands), bool(said)) == ((True, False) if count <= 3 else (False, True))


def test_a_fresh_compare_starts_on_the_pair_sharing_the_most_steps(store, monkeypatch):
    """a-s0 and b-s0 share all 300 steps; every other pair shares fewer."""
    _, ids, _ = store
    at = open_compare(store, monkeypatch)
    assert (at.selectbox(key="compare.a").value, at.selectbox(key="compare.b").value) == (ids["a-s0"], ids["b-s0"])


@pytest.mark.parametrize(("a", "b"), [("a-s1", "a-s0"), ("b-s0", "a-s0")])
def test_a_url_naming_only_run_a_pairs_it_with_another_run(store, monkeypatch, a, b):
    """Not A with itself: B is the run sharing the most steps with A (the first of equals)."""
    _, ids, _ = store
    at = open_compare(store, monkeypatch, run_a=ids[a])
    assert (at.selectbox(key="compare.a").value, at.selectbox(key="compare.b").value) == (ids[a], ids[b])
    assert not any("identical" in s.value for s in at.success)


def test_sharing_pair_counts_the_steps_two_runs_share():
    from regime_dash.ui.widgets import sharing_pair

    runs = pd.DataFrame({"run_id": ["p", "q", "r", "s"], "first_step": [0, 50, 500, 0],
                         "last_step": [99, 149, 599, None]})
    assert sharing_pair(runs) == (0, 1)  # p and q share steps 50..99; r shares none, s has no range
    assert sharing_pair(runs, "q") == (1, 0)
    assert sharing_pair(runs, "r") == (2, 0)  # nothing shared with r: the first other run
    assert sharing_pair(runs.assign(last_step=[99, 149, 599, 120], first_step=[0, 50, 500, 0])) == (0, 3)
