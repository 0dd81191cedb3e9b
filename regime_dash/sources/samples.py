"""The committed examples in ``data/samples/``, and how to make them again.

``recorded_stream.npz`` is the stream of a closed-loop live run
(:mod:`regime_dash.sources.simulator`, spec config, reference engine): a favourable
market turns adverse, the Kelly trap forms and the resurrection probes out of
it, one account takes Run #8's tail shock, and a fold boundary switches train to
eval. ``diag.jsonl`` is that stream replayed by the reference engine, written as
a cluster run writes its diag, so ingest treats it like any cluster file.

Regenerate with ``python -m regime_dash.sources.samples [OUT_DIR]``; the result is the
same bytes for the same code.
"""
from __future__ import annotations

import sys
from pathlib import Path

from regime_dash.diag import catalogue as diag
from regime_dash.engine import replay
from regime_dash.sources.simulator import Schedule, Simulator
from regime_dash.core.streams import Stream

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "samples"
STREAM_NAME = "recorded_stream.npz"
DIAG_NAME = "diag.jsonl"
#: Length, width and seed of the sample run; 1200 steps keep diag.jsonl near 1.2 MB.
STEPS, ACCOUNTS, SEED = 1200, 64, 7
SCHEDULE = Schedule(p_true=((0, 0.58), (150, 0.35), (500, 0.62)), boundaries=(900,), shocks=(700,))


def sample_stream() -> Stream:
    """The live run's stream, recomputed."""
    sim = Simulator(accounts=ACCOUNTS, seed=SEED, schedule=SCHEDULE, engine="reference")
    sim.step(STEPS)
    return sim.stream()


def write_samples(out_dir: str | Path = SAMPLE_DIR) -> tuple[Path, Path]:
    """Write ``recorded_stream.npz`` and ``diag.jsonl`` into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stream = sample_stream()
    stream_path = stream.save(out_dir / STREAM_NAME)
    # inputs logged too, so every output of the sample is re-derived by `check`
    diag_path = diag.write_jsonl(replay(stream, engine="reference", log_inputs=True), out_dir / DIAG_NAME)
    return stream_path, diag_path


if __name__ == "__main__":
    for path in write_samples(sys.argv[1] if len(sys.argv) > 1 else SAMPLE_DIR):
        print(f"{path} ({path.stat().st_size} bytes)")
