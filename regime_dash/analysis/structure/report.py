"""The structure of a run in words: each resume, writer and step slip as a finding at its row.

Severities mean what they mean for every finding: ``fail`` where the run is not the
run the spec describes (a resume whose state did not continue; writers mixed in one
sequence of steps, which no check can judge as one run); ``warn`` where the file cannot
say what happened on some rows (a step label that slipped); ``info`` where the run is
sound and the structure is worth knowing (a clean resume, one writer among several named
by a field).
"""
from __future__ import annotations

from regime_dash.analysis.findings import Finding
from regime_dash.analysis.invariants import MAX_STEPS


def _num(x) -> str:
    if x is None:
        return "NaN"
    return f"{x:,.9g}" if abs(x) >= 1e4 and float(x).is_integer() else f"{x:.9g}"


def _slot_text(s: dict) -> str:
    boot = f", the bootstrap value {_num(s['bootstrap'])}" if s.get("matches_bootstrap") else ""
    before = "" if s.get("before") is None else f"{_num(s['before'])} at the checkpoint → "
    return (f"{s['column'].removeprefix('risk_stack.')} {before}{_num(s['after'])} "
            f"(continuing gives {_num(s['expected'])}{boot})")


def _from(r: dict) -> str:
    if r["checkpoint_step"] is None:
        return f"resumed at step {r['reached']:,} from the start (step {r['step']:,})"
    return f"resumed at step {r['reached']:,} from the checkpoint of step {r['checkpoint_step']:,}"


def resume(r: dict) -> Finding:
    """One resume (a record of :func:`.segments.classify`) as a finding at its first resumed row."""
    ev = {k: v for k, v in r.items() if k != "row" and k != "checkpoint_row"}
    span = [(r["step"], max(r["step"], r["reached"]))]
    head = f"The job {_from(r)}"
    if r["identical"]:
        msg = f"{head}; {r['relogged']:,} rows re-logged identically."
        return Finding("structure.resume", "info", msg, [r["step"]], span, ev, None)
    if r["continued"] is False:
        came = " It came back at the bootstrap values." if r["bootstrap"] else ""
        slots = "; ".join(_slot_text(s) for s in r["slots"][:8])
        msg = (f"{head}, and its state did not continue at step {r['step']:,} (line {r['line']:,}): the slots "
               f"that must survive a resume did not: {slots}.{came}")
        return Finding("structure.resume", "fail", msg, [r["step"]], span, ev, r["slots"][0]["column"])
    diff = r["first_difference"]
    if r["continued"] is None:
        why = ("the checkpoint step is not in the file" if r["checkpoint_step"] is None
               else "no output could be re-derived")
        state = f"whether its state continued cannot be told ({why})"
    else:
        state = "its state continued from the checkpoint"
    if diff is None:  # re-logged rows whose first copies are not all in the file
        msg = f"{head}; {state}, and {r['relogged']:,} rows were re-logged."
        return Finding("structure.resume", "warn" if r["continued"] is None else "info", msg, [r["step"]], span,
                       ev, None)
    msg = (f"{head}; {state}, but the {r['relogged']:,} re-logged rows differ from the first copy from step "
           f"{diff['step']:,} ({', '.join(diff['columns'])}): the run as logged the second time is judged.")
    return Finding("structure.resume", "fail", msg, [r["step"]], span, ev, diff["columns"][0])


def interleaved(x: dict) -> Finding:
    """Writers mixed in one file without a field that names them."""
    msg = (f"Two or more writers interleaved from step {x['step']:,} (line {x['line']:,}): the same steps are "
           f"logged with different values, and the row after step {x['after_step']:,} continues the first copy, "
           f"not the one logged again. No field says who wrote each line; `check --split-writers` tells the "
           f"writers apart by the continuity of their state and judges each as a run of its own.")
    return Finding("structure.writers", "fail", msg, [x["step"]], [], dict(x), None)


def writers(field: str | None, counts: dict[str, int], judged: str) -> Finding:
    """Several writers, told apart by a field (or by the content): each is a run of its own."""
    how = f"the field {field}" if field else "the continuity of their state"
    each = ", ".join(f"{w}: {n:,} rows" for w, n in list(counts.items())[:8])
    msg = (f"{len(counts)} writers, told apart by {how} ({each}); each is a run of its own: this verdict "
           f"judges writer {judged} (`check RUN --writer W` another).")
    return Finding("structure.writers", "info", msg, [], [], {"by": field or "content", "rows": counts,
                                                              "judged": judged}, None)


def slip(s: dict) -> Finding:
    """A step counter that repeated a step or went back while the state went on."""
    what = ("repeated step" if s["kind"] == "repeat" else f"went back from step {s['previous_step']:,} to")
    msg = (f"The step counter {what} {s['step']:,} at line {s['line']:,}, and the row's state continues the "
           f"line before it: the label slipped, the run did not resume.")
    span = []
    if "skipped" in s:
        msg += (f" It skipped step {s['skipped']:,} {s['rows_between']:,} rows later, and the row after the "
                f"skip continues the one before it: the {s['rows_between']:,} rows between are labelled one step low.")
        span = [(s["step"], s["skipped"])]
    ev = {k: v for k, v in s.items() if k not in ("row", "skip_row")}
    return Finding(f"structure.step_{s['kind']}", "warn", msg, [s["step"]], span, ev, None)


def slips(found: list[dict]) -> list[Finding]:
    """The slips, one finding each (the first :data:`MAX_STEPS`)."""
    return [slip(s) for s in found[:MAX_STEPS]]


__all__ = ["interleaved", "resume", "slip", "slips", "writers"]
