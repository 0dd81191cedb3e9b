"""The use cases both shells call: the CLI (:mod:`regime_dash.cli`) and the dashboard (:mod:`regime_dash.ui`)
only parse their input (arguments, widgets) and render what comes back.

| module | what it does |
| --- | --- |
| :mod:`~regime_dash.usecases.sources` | where a replay's inputs come from (a scenario, a stream file, a closed-loop run) |
| :mod:`~regime_dash.usecases.replay` | replay a source and write its diag (``replay --out``); the page's what-if replays |
| :mod:`~regime_dash.usecases.scenario_stream` | a scenario made on a thread while the engine loads, phase 1 per block |
| :mod:`~regime_dash.usecases.frames` | a frame written as diag.jsonl or Parquet |
| :mod:`~regime_dash.usecases.live` | a live run of a source, step by step |
| :mod:`~regime_dash.usecases.sweep` | sweep a stream under a grid of configs, here or over dask |
| :mod:`~regime_dash.usecases.sensitivity` | which config fields move which metrics |
| :mod:`~regime_dash.usecases.check` | check a run, a store, or two runs against each other |
| :mod:`~regime_dash.usecases.repair` | the config that would have passed: the repair search a source names |
| :mod:`~regime_dash.usecases.follow` | follow a growing diag into the store; a followed run's verdict |
| :mod:`~regime_dash.usecases.warmup` | the compiles started in the background, and what a terminal is told of them |

They sit above the core packages (engine, analysis, runs, follow, store) and below the shells and
the benchmarks; nothing here imports streamlit or argparse.
"""
