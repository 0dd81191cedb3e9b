"""What failed in a run, and whether another config could have avoided it.

A repair search only makes sense for a failure that the config decides. Each
failed check and each finding of severity ``fail`` gets one of three causes:

``config``
    The replayed pipeline's behaviour under the config: a Kelly trap that no
    timeout excused (success criterion 1), a cycling dead zone whose timeout
    cannot fire (``timeout_unreachable``), a controller module's own checks.
    Another config may avoid it: these are searched.
``fault``
    A re-derivation (``rederive.*``, ``<module>.rederive.*``) or a formula
    invariant of the kernels (``dead_zone_duration``, ``timeout_flag``, ...):
    the logged outputs are not what the spec's kernels compute from the logged
    inputs and the logged config. Every config obeys these formulas, so no
    config repairs them: the kernel or the logging is at fault. A fused copy that
    drifted from the single path (``fused_mirror_drift``) and an envelope that does
    not decay at its configured rate are faults of the same kind.
``trainer``
    What the replay does not produce: the evaluation pnl and the throughput
    come from the trainer, so no replayed config can show them passing.
``module``
    A controller module's own check, judged where the regime config is searched:
    the module's config decides it, not the regime config (``repair --module NAME``
    searches that one). Where a module's config is searched, its checks are ``config``.

The failures the search targets are those of the base config's replay: a
stored run's ``config`` failure that the replay of its stream under its own
logged config does not show is reported as not reproduced (the stream given may
not be the run's input).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from regime_dash.analysis.invariants import CHECK_IDS, CHECKS
from regime_dash.analysis.verdict import Verdict

CONFIG, FAULT, TRAINER, MODULE = "config", "fault", "trainer", "module"

#: Core checks the config decides: success criterion 1 (every other core check is a formula every config obeys).
CONFIG_CHECKS = frozenset({"kelly_trap"})
#: Core checks whose values come from the trainer, not from the replayed pipeline.
TRAINER_CHECKS = {
    "eval_pnl_baseline": "the evaluation pnl is the trainer's; a replay of the risk stack does not produce it",
    "throughput": "steps/s is the trainer's wall clock; a replay does not produce it",
}
#: Findings of severity ``fail`` that are faults of the code, not of the config.
FAULT_FINDINGS = {
    "fused_mirror_drift": "the fused controllers' copy of a block parted from the single path: a kernel that "
                          "was not updated, fixed in code",
    "envelope_decay_horizon": "the envelope did not decay at its configured rate: the kernel or the logging "
                              "is at fault",
}
#: The core checks that are success criteria, in report order.
SUCCESS_CRITERIA = tuple(c.id for c in CHECKS if "success criterion" in c.title)


@dataclass(frozen=True)
class Failure:
    """One failed check or failing finding, and whether config can help.

    Attributes
    ----------
    id
        The check or finding id.
    kind
        ``check`` or ``finding``.
    cause
        :data:`CONFIG`, :data:`FAULT` or :data:`TRAINER` (the module docstring says which is which).
    step
        The first step it concerns (``None`` when it names none).
    detail
        What the check or finding said.
    why
        Why config can or cannot help, in words.
    count
        Its violations (a check) or its failing findings of this id (a finding).
    """

    id: str
    kind: str
    cause: str
    step: int | None
    detail: str
    why: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_rederive(check_id: str) -> bool:
    return check_id.startswith("rederive.") or ".rederive." in check_id


def _check_cause(check_id: str, modules: bool) -> tuple[str, str]:
    if _is_rederive(check_id):
        return FAULT, ("a re-derivation failed: the logged output is not the kernel's formula of the logged "
                       "inputs and config, which every config obeys: a kernel or logging fault")
    if check_id in TRAINER_CHECKS:
        return TRAINER, TRAINER_CHECKS[check_id]
    if check_id in CHECK_IDS and check_id not in CONFIG_CHECKS:
        return FAULT, ("a formula invariant of the kernels failed; every config obeys it: a kernel or "
                       "logging fault")
    if check_id not in CONFIG_CHECKS and not modules:
        return MODULE, ("a controller module's check: the module's config decides it, not the regime config; "
                        "search the module's with repair --module NAME")
    return CONFIG, "the replayed pipeline's behaviour under its config: another config may avoid it"


def _finding_cause(finding_id: str) -> tuple[str, str]:
    if finding_id in FAULT_FINDINGS:
        return FAULT, FAULT_FINDINGS[finding_id]
    return CONFIG, "the replayed pipeline's behaviour under its config: another config may avoid it"


def diagnose(judged: Verdict, modules: bool = False) -> list[Failure]:
    """Every failed check and failing finding of ``judged``, each with its cause, checks first.

    ``modules``: a controller module's config is searched, so its checks are ``config`` (else ``module``).
    """
    out = []
    for c in judged.failed:
        cause, why = _check_cause(c.id, modules)
        out.append(Failure(c.id, "check", cause, c.first_step, c.detail, why, int(c.violations)))
    by_id: dict[str, list] = {}
    for f in judged.failing_findings:
        by_id.setdefault(f.id, []).append(f)
    for fid, found in by_id.items():
        cause, why = _finding_cause(fid)
        steps = [s for f in found for s in f.steps]
        out.append(Failure(fid, "finding", cause, min(steps) if steps else None, found[0].message, why, len(found)))
    return out


def blocking(failures: list[Failure]) -> list[Failure]:
    """The failures the config searched cannot repair (faults, the trainer's, a module's check where the
    regime config is searched): with any, the search does not run."""
    return [f for f in failures if f.cause != CONFIG]


def failed_ids(judged: Verdict) -> list[str]:
    """The ids of the failed checks, then of the failing findings (each once)."""
    return [c.id for c in judged.failed] + list(dict.fromkeys(f.id for f in judged.failing_findings))


__all__ = ["CONFIG", "FAULT", "MODULE", "TRAINER", "CONFIG_CHECKS", "SUCCESS_CRITERIA", "Failure", "blocking", "diagnose",
           "failed_ids"]
