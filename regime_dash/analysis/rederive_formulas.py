"""The re-derived formulas: which logged output each one recomputes, from which logged fields, in words.

One :class:`Formula` per output of :data:`regime_dash.engine.rederive.OUTPUTS`. The
maths is not here: the engine runs the reference step functions. This table says
what a user reads beside a divergence (the formula, the inputs with their
values), what a row needs to be compared, and how close is close enough.

Tolerance. The kernels and all three engines compute in float32 with
``--fmad=false`` and correctly rounded division and square root, so every
re-derived output is compared exactly by default: a logged value that differs
in its last bit differs. ``fma`` marks the formulas with a multiply followed by
an add, the only places where a trainer built with FMA contraction can round
differently (by at most one ulp of the result per contracted site);
``CheckOptions.rederive_ulps`` loosens those formulas alone. Flags, counters and
selections (``max``, a branch) are always exact.
"""
from __future__ import annotations

from dataclasses import dataclass

from regime_dash.diag import catalogue as diag
from regime_dash.diag.catalogue import CONFIG_COLUMNS as CFG
from regime_dash.diag.catalogue import INPUT_COLUMNS as IN

#: The lag of a read: the row itself, or the row before (after the boundary's reset, where there is one).
NOW, PREV = 0, 1


@dataclass(frozen=True)
class Formula:
    """One re-derived output.

    Attributes
    ----------
    output
        Its name in :data:`regime_dash.engine.rederive.OUTPUTS` (the check id is ``rederive.<output>``).
    column
        The diag column it recomputes.
    kernel
        The kernel that writes it.
    text
        The formula in words.
    reads
        ``(column, lag)`` of the logged values it reads, shown as its inputs; a row where one is not
        finite is not compared (``finite_regime_fields`` blames those).
    needs
        Columns a diag need not carry (inputs, config) without which the output cannot be recomputed.
    chain
        Needs the Welford mean/M2 the diag does not log, carried from the run's first step.
    fma
        Has a multiply-add a trainer built with FMA contraction may round once instead of twice.
    """

    output: str
    column: str
    kernel: str
    text: str
    reads: tuple[tuple[str, int], ...]
    needs: tuple[str, ...] = ()
    chain: bool = False
    fma: bool = False

    @property
    def check_id(self) -> str:
        return "rederive." + self.output


_POPART, _OBS, _IQN, _KELLY, _V9 = ("rl_popart_normalize", "rl_regime_observer", "rl_iqn_action_tau_controller",
                                    "rl_kelly_fraction_controller", "eval_warmup_decay")
_SUMS = (IN["batch_sum"], IN["batch_sumsq"], CFG["popart_alpha"])

FORMULAS: tuple[Formula, ...] = (
    Formula("popart_mean", diag.POPART_MEAN, _POPART,
            "μ_t = (1−α)·μ_{t−1} + α·Σr/b (model of PopArt's EMA)",
            ((diag.POPART_MEAN, PREV), (diag.B_SIZE, NOW)), _SUMS, fma=True),
    Formula("popart_var", diag.POPART_VAR, _POPART,
            "var_t = max((1−α)·var_{t−1} + α·(Σr²/b − (Σr/b)²), 1e-8) (model of PopArt's EMA)",
            ((diag.POPART_VAR, PREV), (diag.B_SIZE, NOW)), _SUMS, fma=True),
    Formula("envelope", diag.ENVELOPE, _POPART,
            "envelope_t = m if m > envelope_{t−1} else (1−α_d)·envelope_{t−1} + α_d·m, m = max|r| of the "
            "batch (F4; 0 after a boundary's reset)",
            ((diag.ENVELOPE, PREV), (diag.DECAY_ALPHA, NOW)), (IN["batch_max_abs"],), fma=True),
    Formula("sigma", diag.SIGMA, _POPART, "σ_t = max(sqrt(var_t), envelope_t) with F4, sqrt(var_t) without",
            ((diag.POPART_VAR, NOW), (diag.ENVELOPE, NOW))),
    Formula("flag", diag.FLAG, _OBS, "flag_t = 1 if kelly_f_{t−1} = 0 and flat_count_t = b_size and "
            "cooldown_t = 0, else 0 (the one-step lag on kelly_f)",
            ((diag.KELLY, PREV), (diag.FLAT_COUNT, NOW), (diag.B_SIZE, NOW), (diag.COOLDOWN, NOW))),
    Formula("duration", diag.DURATION, _OBS,
            "duration_t = duration_{t−1} + 1 while flag_t = 1, else 0 (cleared at a boundary)",
            ((diag.FLAG, NOW), (diag.DURATION, PREV))),
    Formula("timeout", diag.TIMEOUT, _OBS, "timeout_t = 1 if duration_t > max_duration, else 0",
            ((diag.DURATION, NOW), (diag.MAX_DURATION, NOW))),
    Formula("welford_count", diag.COUNT, _OBS,
            "count_t = count_{t−1} + 1 unless worst_t = worst_{t−1} = 0 (kept across boundaries)",
            ((diag.COUNT, PREV), (diag.WORST, NOW), (diag.WORST, PREV))),
    Formula("variance", diag.VARIANCE, _OBS,
            "variance_t = M2_t/(count_t − 1), Welford over Δworst_t = worst_t − worst_{t−1} (M2 and the "
            "mean are not logged: carried from the run's first step)",
            ((diag.VARIANCE, PREV), (diag.COUNT, NOW), (diag.WORST, NOW), (diag.WORST, PREV)),
            chain=True, fma=True),
    Formula("recency", diag.RECENCY, _OBS,
            "recency_t = 0 if count_t ≥ 10 and σ > 0 and |Δworst_t| > threshold·σ with σ = sqrt(variance_t), "
            "else recency_{t−1} + 1 (1e6 after a boundary's reset)",
            ((diag.RECENCY, PREV), (diag.VARIANCE, NOW), (diag.COUNT, NOW), (diag.WORST, NOW),
             (diag.WORST, PREV), (diag.SIGMA_THR, NOW))),
    Formula("factor", diag.FACTOR, _OBS, "factor_t = min(1, recency_t / max(n_recovery, 1))",
            ((diag.RECENCY, NOW), (diag.N_RECOVERY, NOW))),
    Formula("live", diag.LIVE, _OBS, "ε_live_t = ε_min + (ε_max − ε_min)·factor_t",
            ((diag.FACTOR, NOW), (diag.EPS_MIN, NOW), (diag.EPS_MAX, NOW)), fma=True),
    Formula("tau_min_effective", diag.TAU_MIN_EFF, _IQN,
            "τ_min_eff_t = τ_min·boost while F5 is on and recency_t < n_window, else τ_min",
            ((diag.TAU_MIN, NOW), (diag.RECENCY, NOW), (diag.BOOST_FACTOR, NOW), (diag.BOOST_WINDOW, NOW))),
    Formula("tau_action", diag.TAU_ACTION, _IQN, "τ_t = max(τ_input_t, τ_min_eff_t)",
            ((diag.TAU_MIN_EFF, NOW),), (IN["tau_action_input"],)),
    Formula("analytic", diag.KELLY_ANALYTIC, _KELLY,
            "analytic_t = clamp(safety_frac_{t−1}·edge_t, 0, cap) (model of the analytic Kelly)",
            ((diag.SAFETY_FRAC, PREV),), (IN["kelly_edge"], CFG["kelly_cap"])),
    Formula("kelly", diag.KELLY, _KELLY,
            "kelly_f_t = ε_live_t if F2 is on and flag_t = 1 and timeout_t = 0, else analytic_t (F2)",
            ((diag.KELLY_ANALYTIC, NOW), (diag.FLAG, NOW), (diag.TIMEOUT, NOW), (diag.LIVE, NOW))),
    Formula("remaining", diag.REMAINING, _V9,
            "remaining_t = remaining_{t−1} − 1 while > 0, −1 after 0; a boundary restarts it at steps_config "
            "(model of the v9 countdown)",
            ((diag.REMAINING, PREV), (diag.STEPS_CONFIG, NOW))),
    Formula("safety_frac", diag.SAFETY_FRAC, _V9,
            "safety_frac_t = normal + (defensive − normal)·min(1, remaining_t / max(decay_steps, 1)) during the "
            "transition, normal at its end (model of the v9 ramp)",
            ((diag.REMAINING, PREV), (diag.REMAINING, NOW), (diag.DECAY_STEPS_CONFIG, NOW)),
            (CFG["safety_frac_defensive"], CFG["safety_frac_normal"]), fma=True),
)
BY_OUTPUT = {f.output: f for f in FORMULAS}

#: Logged fields that are inputs of the pipeline (recorded, nothing to recompute them from); the last,
#: the controller path a fused replay ran (:data:`regime_dash.diag.catalogue.FUSED_COLUMN`).
INPUT_FIELDS: tuple[str, ...] = (
    diag.COOLDOWN, diag.WORST, diag.B_SIZE, diag.MAX_DURATION, diag.STEPS_CONFIG, diag.DECAY_STEPS_CONFIG,
    diag.SIGMA_THR, diag.EPS_MIN, diag.EPS_MAX, diag.N_RECOVERY, diag.DECAY_ALPHA, diag.BOOST_FACTOR,
    diag.BOOST_WINDOW, diag.TAU_MIN, *CFG.values(), *IN.values(), diag.FUSED_COLUMN)

__all__ = ["Formula", "FORMULAS", "BY_OUTPUT", "INPUT_FIELDS", "NOW", "PREV"]
