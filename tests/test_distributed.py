"""Scale-out over dask.distributed: a 2-process CPU LocalCluster gives the in-process tables exactly."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from regime_dash import RegimeConfig
from regime_dash.runs import scheduler as distributed
from regime_dash.runs.check_all import COLUMNS, check_all, store_check, summary_row
from regime_dash.cli import main
from regime_dash.errors import EngineUnavailable, ValidationError
from regime_dash.sources.samples import SAMPLE_DIR
from regime_dash.runs.sweeps import sweep
from test_fast_engine import regime_stream

pytest.importorskip("distributed", reason="dask.distributed is in requirements-test.txt; not installed here")

GRID = {"max_duration": [15, 60, 400], "eps_min": [0.0, 0.05], "resurrection": [True, False]}


@pytest.fixture(scope="module")
def stream():
    return regime_stream(np.random.default_rng(5), 260, 23, v_pred=False)


@pytest.fixture(scope="module")
def client():
    import distributed as dd

    with distributed.local_cluster(n_workers=2, gpus=0) as cluster, dd.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
        yield c


def test_shard_bounds_cover_every_index_once():
    assert distributed.shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert distributed.shard_bounds(2, 5) == [(0, 1), (1, 2)]
    for n, parts in ((1, 1), (17, 4), (1000, 7)):
        bounds = distributed.shard_bounds(n, parts)
        assert [i for a, b in bounds for i in range(a, b)] == list(range(n))


def test_bad_scheduler_names_the_value():
    with pytest.raises(ValidationError, match="scheduler must be"):
        with distributed.connect(42):
            pass
    with pytest.raises(ValidationError, match="scheduler must be"):
        with distributed.connect("  "):
            pass


def test_cluster_has_two_worker_processes(client):
    assert distributed.worker_count(client) == 2
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2
    # both on this host: phase 1 may use as many of this host's GPUs as there are workers
    assert distributed.local_gpus(client) == min(2, distributed.gpu_count())


def test_fast_sweep_over_two_processes_equals_in_process(stream, client):
    local = sweep(stream, GRID, engine="fast", device="cpu", keep=[0, 7, 11])
    remote = sweep(stream, GRID, engine="fast", device="cpu", keep=[0, 7, 11], scheduler=client)
    assert len(remote.table) == 12 and remote.engine == local.engine == "fast-cpu"
    pd.testing.assert_frame_equal(remote.table, local.table, check_exact=True)
    assert sorted(remote.trajectories) == [0, 7, 11]
    for k in (0, 7, 11):
        pd.testing.assert_frame_equal(remote.trajectories[k], local.trajectories[k], check_exact=True)
    # the configs differ, so equal tables are not an accident of one config everywhere
    from regime_dash.engine.summary import METRICS

    assert len(remote.table[list(METRICS)].drop_duplicates()) > 1


def test_a_light_fast_sweep_over_two_processes_equals_in_process(stream, client):
    """The workers get the per-step fields and the given phase 1: the whole stream's table."""
    from regime_dash.engine import fast

    want = sweep(stream, GRID, engine="fast", device="cpu", keep=[0, 7])
    remote = sweep(stream.per_step(), GRID, engine="fast", device="cpu", keep=[0, 7], scheduler=client,
                   stats=fast.step_stats(stream))
    pd.testing.assert_frame_equal(remote.table, want.table, check_exact=True)
    for k in (0, 7):
        pd.testing.assert_frame_equal(remote.trajectories[k], want.trajectories[k], check_exact=True)


def test_config_list_and_per_replay_engine_over_two_processes(stream, client):
    configs = [RegimeConfig(max_duration=20 + 30 * k, eps_min=0.01 * k) for k in range(5)]
    local = sweep(stream, configs, engine="reference", keep=[4])
    remote = sweep(stream, configs, engine="reference", keep=[4], scheduler=client)
    pd.testing.assert_frame_equal(remote.table, local.table, check_exact=True)
    pd.testing.assert_frame_equal(remote.trajectories[4], local.trajectories[4], check_exact=True)
    assert remote.configs == configs


def test_progress_counts_shards(stream, client):
    seen = []
    sweep(stream, GRID, engine="fast", device="cpu", scheduler=client, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 2), (2, 2)]


def test_a_bad_grid_value_raises_our_error_from_a_worker(stream, client):
    from regime_dash.errors import ConfigError

    with pytest.raises(ConfigError, match="eps_min=2.0"):
        sweep(stream, {"eps_min": [0.1, 2.0]}, engine="fast", device="cpu", scheduler=client)


def test_cli_sweep_takes_a_scheduler_address(client, tmp_path, capsys):
    out = tmp_path / "t.csv"
    args = ["sweep", "--scenario", "kelly_trap_run8", "--steps", "2000", "--accounts", "8",
            "--grid", "max_duration=20,400", "--engine", "fast", "--device", "cpu", "--out", str(out)]
    assert main(args) == 0
    local = pd.read_csv(out)
    assert main(args + ["--scheduler", client.scheduler.address]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out), local, check_exact=True)
    capsys.readouterr()


# ---- check --all ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    from regime_dash.store.run_store import RunStore

    root = tmp_path_factory.mktemp("store")
    store = RunStore(root)
    src = SAMPLE_DIR / "diag.jsonl"
    store.ingest(src, name="a")
    # a second, different run: the sample cut to its first 300 lines
    cut = root.parent / "cut.jsonl"
    cut.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:300]), encoding="utf-8")
    store.ingest(cut, name="b")
    return root


def test_summary_row_counts_and_first_failure():
    doc = {"checks": [{"id": "x", "status": "pass", "first_step": None},
                      {"id": "y", "status": "fail", "first_step": 40},
                      {"id": "z", "status": "fail", "first_step": 7},
                      {"id": "w", "status": "skip", "first_step": None}],
           "episodes": {"dead_zone": [{}, {}]}, "events": {"tail": [{}], "timeouts": []}}
    row = summary_row("r1", doc)
    assert row == {"run": "r1", "status": "fail", "pass": 1, "fail": 2, "skip": 1,
                   "first_failure": "z @ step 7", "findings": "2 dead_zone, 1 tail"}


def test_check_all_in_process_and_over_two_processes_agree(store_dir, client):
    from regime_dash.store.run_store import RunStore
    import functools

    runs = [r["run_id"] for r in RunStore(store_dir).list_runs()] + ["no-such-run"]
    check = functools.partial(store_check, store=str(store_dir))
    local = check_all(runs, check)
    remote = check_all(runs, check, scheduler=client)
    assert list(local.columns) == list(COLUMNS) and len(local) == 3
    pd.testing.assert_frame_equal(remote, local)
    assert local["status"].iloc[2] == "error" and "no-such-run" in local["first_failure"].iloc[2]
    ok = local.iloc[:2]
    assert (ok["pass"] + ok["fail"] + ok["skip"] > 0).all()
    # each row is the run's own check report
    for _, row in ok.iterrows():
        assert row.to_dict() == summary_row(row["run"], store_check(row["run"], str(store_dir)))


def test_cli_check_all_prints_one_row_per_run(store_dir, client, capsys, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(store_dir, copy)
    rc = main(["check", "--all", "--store", str(copy), "--json", "--scheduler", client.scheduler.address])
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["runs"]) == 2 and set(doc["runs"][0]) == set(COLUMNS)
    assert rc == (0 if all(r["status"] == "ok" for r in doc["runs"]) else 1)
    assert main(["check", "--all", "some-run", "--store", str(copy)]) == 2


def test_shared_inputs_are_broadcast_to_every_worker_under_fresh_keys(stream, client):
    first = sweep(stream, GRID, engine="fast", device="cpu", scheduler=client).table
    for _ in range(3):  # each sweep scatters its inputs again, under keys of its own
        pd.testing.assert_frame_equal(sweep(stream, GRID, engine="fast", device="cpu", scheduler=client).table,
                                      first, check_exact=True)
    # a stream with one value changed has another key, and gives its own table
    changed = regime_stream(np.random.default_rng(5), 260, 23, v_pred=False)
    changed.session_pnl_worst[100:] -= np.float32(30.0)
    other = sweep(changed, GRID, engine="fast", device="cpu", scheduler=client).table
    pd.testing.assert_frame_equal(other, sweep(changed, GRID, engine="fast", device="cpu").table,
                                  check_exact=True)
    assert not other.equals(first)
    # every shared value is on every worker once submitted (one shard: only its worker needs
    # them), one key per value, equal or not; the memory manager, which trims copies nobody
    # waits for, paused
    workers = sorted(client.nthreads())
    values = [np.arange(4.0), np.arange(4.0), np.arange(1.0, 5.0), None]
    before = client.has_what()
    client.amm.stop()
    try:
        futures = distributed.submit_shards(_sums, [0.5], client, shared=values)
        held = client.has_what()
    finally:
        client.amm.start()
    new = {w: {k for k in held[w] if k not in before[w] and not k.startswith("_sums")} for w in workers}
    assert sorted(held) == workers and len(new[workers[0]]) == 4 and new[workers[1]] == new[workers[0]]
    assert distributed.gather_shards(futures) == [[6.0, 6.0, 10.0, None]]


def _sums(shard, *values):
    """The sums of a shard's shared values, after ``shard`` seconds."""
    import time

    time.sleep(shard)  # a shard that takes time: what is tested
    return [None if v is None else float(np.sum(v)) for v in values]


def test_shards_wait_for_phase_1_and_are_released_when_it_fails(stream, client, monkeypatch):
    import importlib
    import time

    from regime_dash.errors import StreamError

    sweep_module = importlib.import_module("regime_dash.engine.sweep_shards")  # where phase 1 is computed
    real = sweep_module.phase1_stats

    def slow(*args, **kwargs):  # the shards are on the workers before phase 1 is done
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "phase1_stats", slow)
    want = sweep(stream, GRID, engine="fast", device="cpu").table
    pd.testing.assert_frame_equal(sweep(stream, GRID, engine="fast", device="cpu", scheduler=client).table, want,
                                  check_exact=True)

    def broken(*args, **kwargs):
        time.sleep(0.5)  # the shards are on the workers before phase 1 fails
        raise StreamError("phase 1 failed here", field="rewards", value=None)

    monkeypatch.setattr(sweep_module, "phase1_stats", broken)
    with pytest.raises(StreamError, match="phase 1 failed here"):
        sweep(stream, GRID, engine="fast", device="cpu", scheduler=client)
    # the waiting shards were told, not left holding the workers' one thread each
    monkeypatch.setattr(sweep_module, "phase1_stats", real)
    t0 = time.perf_counter()
    again = sweep(stream, GRID, engine="fast", device="cpu", scheduler=client).table
    assert time.perf_counter() - t0 < 60
    pd.testing.assert_frame_equal(again, want, check_exact=True)


def test_a_later_value_reaches_a_task_that_started_before_it(client):
    import time

    with distributed.later(client) as (handle, publish):
        future = client.submit(lambda h: float(np.sum(distributed.published(h))), handle, pure=False)
        time.sleep(0.3)  # time for the task to start and wait: that it waits is what is tested
        assert not future.done()  # it waits for the value
        publish(np.arange(5.0))
        assert future.result(timeout=60) == 10.0
    with pytest.raises(RuntimeError):
        with distributed.later(client) as (handle, publish):
            orphan = client.submit(lambda h: distributed.published(h), handle, pure=False)
            raise RuntimeError("the client fails before publishing")
    with pytest.raises(EngineUnavailable, match="failed; its work was abandoned"):
        orphan.result(timeout=60)
    # the block ends without publishing (and without an error): the task is told that
    with distributed.later(client) as (handle, publish):
        unpublished = client.submit(lambda h: distributed.published(h), handle, pure=False)
    with pytest.raises(EngineUnavailable, match="stopped before publishing"):
        unpublished.result(timeout=60)
    # published, then the client fails: a task that comes to it afterwards raises at once too
    with pytest.raises(RuntimeError):
        with distributed.later(client) as (handle, publish):
            publish(np.arange(3.0))
            raise RuntimeError("the client fails after publishing")
    late = client.submit(lambda h: distributed.published(h, timeout=30), handle, pure=False)
    with pytest.raises(EngineUnavailable, match="failed; its work was abandoned"):
        late.result(timeout=60)


def _read_published(variable, fetch_timeout=distributed.FETCH_TIMEOUT_S):
    """(worker, sum of the value published into ``variable``)."""
    import distributed as dd

    return dd.get_worker().address, float(np.sum(distributed.published(variable, timeout=30,
                                                                        fetch_timeout=fetch_timeout)))


@pytest.mark.filterwarnings("ignore:Client .* desires key .* but key is unknown")
def test_a_published_value_is_a_future_on_every_worker_read_where_it_runs(client):
    workers = sorted(client.nthreads())
    client.amm.stop()  # what is checked is the broadcast, not what the memory manager trims later
    try:
        with distributed.later(client) as (variable, publish):
            futures = [client.submit(_read_published, variable, workers=[w], pure=False) for w in workers]
            publish(np.arange(5.0))
            future = variable.get(timeout=30)  # a real future, held by the variable
            assert future.status == "finished" and sorted(client.who_has(future)[future.key]) == workers
            assert sorted(f.result(timeout=60) for f in futures) == [(w, 10.0) for w in workers]
    finally:
        client.amm.start()
    # a value that is gone once published: the task says so, not dask's own error
    with distributed.later(client) as (variable, publish):
        publish(np.arange(5.0))
        client.cancel(variable.get(timeout=30), force=True)
        # a short fetch timeout: a cancelled value is waited for until it runs out
        lost = client.submit(_read_published, variable, fetch_timeout=2.0, pure=False)
        with pytest.raises(EngineUnavailable, match="could not be fetched within 2 s"):
            lost.result(timeout=120)


def _where_it_ran(shard, data):
    import distributed as dd

    return dd.get_worker().address


def test_each_shard_runs_on_its_own_worker_wherever_its_inputs_are(client):
    # the bug this guards: shards of a two-GPU sweep placed together on one worker (run one after
    # the other there: a one-GPU time); data held by one worker alone draws the scheduler to it
    workers = sorted(client.scheduler_info()["workers"])
    held = client.scatter(np.arange(1000.0), workers=[workers[0]], broadcast=False)
    for _ in range(3):
        futures = distributed.submit_shards(_where_it_ran, [0, 1, 2, 3], client, shared=[held])
        assert distributed.gather_shards(futures) == [workers[0], workers[1], workers[0], workers[1]]


def _fails_or_sleeps(shard):
    import time

    if shard == "bad":
        raise ValidationError("shard 'bad' is bad", field="shard", value=shard)
    time.sleep(float(shard))  # a slow shard that nobody may wait for: what is tested
    return shard


@pytest.mark.slow  # a shard that sleeps 5 s is what it tests
def test_a_shards_error_is_raised_with_its_type_without_waiting_for_the_others(client):
    import time

    t0 = time.perf_counter()
    futures = distributed.submit_shards(_fails_or_sleeps, ["bad", "5"], client)
    with pytest.raises(ValidationError, match="shard 'bad' is bad") as info:
        distributed.gather_shards(futures)
    assert info.value.value == "bad"
    assert time.perf_counter() - t0 < 4  # nobody waited for the other shard (5 s) ...
    assert futures[1].status == "cancelled"  # ... which was cancelled: its fetching thread has ended
    seen = []
    assert distributed.map_shards(_fails_or_sleeps, ["0.2", "0"], client,
                                  progress=lambda d, t: seen.append((d, t))) == ["0.2", "0"]
    assert seen == [(1, 2), (2, 2)]
