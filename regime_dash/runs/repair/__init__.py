"""Find the config that would have passed: a repair search over the config slots.

:func:`repair` (the regime config over one stream) answers which config would have
avoided a run's failures, or says honestly that config cannot help or that none in
the domain passes. The pieces: what failed and whether config can help
(:mod:`.failures`), the fields searched and the distance (:mod:`.space`), what a sweep
row predicts (:mod:`.targets`), Optuna's samplers in batches (:mod:`.optimiser`), the
ranking every repair shares (:mod:`.flow`), the full replays that verify
(:mod:`.verifier`) and the answer (:mod:`.result`). The controller modules' search is :mod:`regime_dash.modules.repair`.
"""
from __future__ import annotations

from regime_dash.runs.repair.failures import Failure, diagnose
from regime_dash.runs.repair.regime import logged_config, repair, repair_run
from regime_dash.runs.repair.verifier import key_metrics
from regime_dash.runs.repair.result import Candidate, RepairResult
from regime_dash.runs.repair.space import SearchSpace

__all__ = ["Candidate", "Failure", "RepairResult", "SearchSpace", "diagnose", "key_metrics", "logged_config",
           "repair", "repair_run"]
