"""The ISV slot registry: the single source of slot indices.

Every slot the regime-observer spec reads or writes is declared here once, with
its index, role, bootstrap value and boundary policy. Kernels get the indices as
``-D`` defines (:meth:`SlotLayout.defines`), the engines get bootstrap vectors
and the reset plan from here, and a user can swap in their trainer's own
``isv_slots.rs`` layout with :func:`import_rust`.

Index blocks
------------
* ``696..715``: the spec's 20 new slots (``RL_SLOTS_END`` = 716).
* ``685..687``: the v9 slots renamed by F3; ``688..695``: v9's target values.
* ``665..684``: **local** slots. The spec reads these but does not number them
  (``RL_KELLY_FRACTION_INDEX``, ``POPART_SIGMA_INDEX``, ...); a trainer's real
  ``isv_slots.rs`` places them elsewhere, so they are marked ``local`` and are
  the first thing an import replaces.

Boundary policies
-----------------
The spec's "Regime observer reset policy" names four behaviours of
``reset_session_state``; each slot has exactly one:

``clear``        write 0.0 (transient state).
``re-bootstrap`` write the slot's bootstrap value (counters back to sentinel).
``align``        copy another slot's current value (``align_to``), e.g.
                 PREV_WORST_PNL ← the just-reset session worst (issue γ).
``keep``         leave untouched (Welford state, config, inputs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

import numpy as np

from regime_dash.errors import SlotLayoutError

#: The four slot roles.
ROLES = ("signal", "state", "config", "input")
#: The four boundary policies of ``reset_session_state``.
POLICIES = ("clear", "re-bootstrap", "align", "keep")
#: Integer codes of the policies as the reset kernels see them.
POLICY_CODES = {"keep": 0, "clear": 1, "re-bootstrap": 2, "align": 3}

RL_SLOTS_END = 716


@dataclass(frozen=True)
class Slot:
    """One ISV slot.

    Attributes
    ----------
    name
        The spec's constant name, e.g. ``RL_REGIME_DEAD_ZONE_FLAG_INDEX``.
    index
        Position in the float32 ISV buffer.
    role
        ``signal`` (emitted each step), ``state`` (internal, carried between
        steps), ``config`` (set once, what-if knobs) or ``input`` (written from
        the replayed stream each step).
    bootstrap
        Value at training start (the spec's bootstrap list).
    policy
        Boundary policy, one of :data:`POLICIES`.
    doc
        One line saying what the slot holds.
    local
        True when the spec reads the slot but does not number it.
    align_to
        For ``policy == "align"``: the slot whose value is copied.
    """

    name: str
    index: int
    role: str
    bootstrap: float
    policy: str
    doc: str
    local: bool = False
    align_to: str | None = None
    producer: str = ""
    consumers: tuple[str, ...] = ()


def slot(name: str, index: int, role: str, bootstrap: float, policy: str, doc: str,
         producer: str = "", consumers: Iterable[str] = (), *, local: bool = False,
         align_to: str | None = None) -> Slot:
    """A :class:`Slot` with a float bootstrap and a tuple of consumers (registry and modules)."""
    return Slot(name, index, role, float(bootstrap), policy, doc, local, align_to,
                producer, tuple(consumers))


_OBS = "rl_regime_observer"
_KELLY = "rl_kelly_fraction_controller"
_TAU = "rl_iqn_action_tau_controller"
_POP = "rl_popart_normalize"
_V9 = "eval_warmup_decay"
_RESET = "reset_session_state"
_HOST = "host (stream input)"
_CFG = "host (config)"

SPEC_SLOTS: tuple[Slot, ...] = (
    # regime_observer outputs (surface signals)
    slot("RL_REGIME_DEAD_ZONE_FLAG_INDEX", 696, "signal", 0.0, "clear",
       "1 while kelly_f(t-1)=0, every account is flat and there is no cooldown",
       producer=_OBS, consumers=(_KELLY,)),
    slot("RL_REGIME_DEAD_ZONE_DURATION_INDEX", 697, "signal", 0.0, "clear",
       "consecutive dead-zone steps; 0 outside the dead zone", producer=_OBS),
    slot("RL_REGIME_DEAD_ZONE_TIMEOUT_FLAG_INDEX", 698, "signal", 0.0, "clear",
       "1 once DURATION (consecutive dead-zone steps) exceeds MAX_DURATION; under F2 the dead zone "
       "cycles and DURATION stays <= 1, so it never fires (finding timeout_unreachable)",
       producer=_OBS, consumers=(_KELLY,)),
    slot("RL_REGIME_RECOVERY_FACTOR_INDEX", 699, "signal", 1.0, "re-bootstrap",
       "min(1, tail recency / N_recovery): the ε ramp position", producer=_OBS),
    slot("RL_REGIME_SESSION_PNL_VARIANCE_EMA_INDEX", 700, "signal", 0.0, "keep",
       "Welford sample variance of Δ session-pnl-worst", producer=_OBS, consumers=(_OBS,)),
    slot("RL_REGIME_TAIL_EVENT_RECENCY_INDEX", 701, "signal", 1.0e6, "re-bootstrap",
       "steps since the last |Δworst| > threshold·σ tail event (1e6 = none seen)",
       producer=_OBS, consumers=(_TAU, _OBS)),
    # regime_observer internal Welford state
    slot("RL_REGIME_SESSION_PNL_VAR_M2_INDEX", 702, "state", 0.0, "keep",
       "Welford M2 of Δ session-pnl-worst", producer=_OBS, consumers=(_OBS,)),
    slot("RL_REGIME_SESSION_PNL_VAR_MEAN_INDEX", 703, "state", 0.0, "keep",
       "Welford mean of Δ session-pnl-worst", producer=_OBS, consumers=(_OBS,)),
    slot("RL_REGIME_SESSION_PNL_VAR_COUNT_INDEX", 704, "state", 0.0, "keep",
       "Welford count (a float32 slot); tail detection waits for count >= 10",
       producer=_OBS, consumers=(_OBS,)),
    slot("RL_REGIME_PREV_WORST_PNL_INDEX", 705, "state", 0.0, "align",
       "session-pnl-worst of the previous step (the Δ source)",
       align_to="RL_SESSION_PNL_WORST_INDEX", producer=_OBS, consumers=(_OBS,)),
    # Kelly resurrection
    slot("RL_KELLY_EPS_RECOVERY_LIVE_INDEX", 706, "signal", 0.50, "re-bootstrap",
       "ε_recovery = ε_min + (ε_max − ε_min)·recovery_factor", producer=_OBS,
       consumers=(_KELLY,)),
    slot("RL_KELLY_EPS_RECOVERY_MIN_INDEX", 707, "config", 0.05, "keep",
       "ε at a fresh tail event", producer=_CFG, consumers=(_OBS,)),
    slot("RL_KELLY_EPS_RECOVERY_MAX_INDEX", 708, "config", 0.50, "keep",
       "ε once fully recovered", producer=_CFG, consumers=(_OBS,)),
    slot("RL_KELLY_EPS_RECOVERY_N_RECOVERY_INDEX", 709, "config", 100.0, "keep",
       "steps of tail-free time for a full ε ramp", producer=_CFG, consumers=(_OBS,)),
    slot("RL_REGIME_DEAD_ZONE_MAX_DURATION_INDEX", 710, "config", 1000.0, "keep",
       "consecutive dead-zone steps (DURATION) above which the timeout flag stops resurrection; "
       "unreachable while resurrection cycles the flag", producer=_CFG,
       consumers=(_OBS,)),
    # IQN τ tail boost
    slot("RL_IQN_TAU_TAIL_BOOST_FACTOR_INDEX", 711, "config", 1.5, "keep",
       "τ_min multiplier while a tail event is recent", producer=_CFG, consumers=(_TAU,)),
    slot("RL_IQN_TAU_TAIL_BOOST_N_WINDOW_INDEX", 712, "config", 100.0, "keep",
       "steps after a tail event during which τ_min is boosted", producer=_CFG,
       consumers=(_TAU,)),
    slot("RL_REGIME_TAIL_SIGMA_THRESHOLD_INDEX", 713, "config", 3.0, "keep",
       "tail event threshold in σ of Δ session-pnl-worst", producer=_CFG,
       consumers=(_OBS,)),
    # PopArt per-account max envelope (F4)
    slot("RL_POPART_MAX_ABS_REWARD_EMA_INDEX", 714, "state", 0.0, "clear",
       "fast-up, slow-down envelope of the per-step max |r_i| (σ floor)",
       producer=_POP, consumers=(_POP,)),
    slot("RL_POPART_MAX_DECAY_ALPHA_INDEX", 715, "config", 0.01, "keep",
       "envelope decay α (0.01 ≈ 69-step half-life)", producer=_CFG, consumers=(_POP,)),
)

V9_SLOTS: tuple[Slot, ...] = (
    slot("RL_REGIME_TRANSITION_REMAINING_INDEX", 685, "state", -1.0, "align",
       "v9 transition steps left: N at a boundary, down to 0, then -1 (idle)",
       align_to="RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX", producer=_V9,
       consumers=(_V9,)),
    slot("RL_REGIME_TRANSITION_STEPS_CONFIG_INDEX", 686, "config", 500.0, "keep",
       "v9 transition length after a boundary (was RL_EVAL_WARMUP_STEPS_CONFIG_INDEX)",
       producer=_CFG, consumers=(_RESET,)),
    slot("RL_REGIME_TRANSITION_DECAY_STEPS_CONFIG_INDEX", 687, "config", 250.0, "keep",
       "v9 ramp length at the end of the transition (was RL_EVAL_WARMUP_DECAY_STEPS_CONFIG_INDEX)",
       producer=_CFG, consumers=(_V9,)),
    slot("RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX", 688, "config", 0.25, "keep",
       "v9 target: Kelly safety_frac right after a boundary", producer=_CFG,
       consumers=(_V9, _RESET)),
    slot("RL_V9_KELLY_SAFETY_FRAC_NORMAL_INDEX", 689, "config", 0.50, "keep",
       "v9 target: Kelly safety_frac once the transition is over", producer=_CFG,
       consumers=(_V9,)),
) + tuple(
    slot(f"RL_V9_TARGET_{i}_INDEX", i, "config", 0.0, "keep",
       "v9-owned target value; not modelled by regime-dash (kept for the layout)",
       producer=_CFG)
    for i in range(690, 696)
)

LOCAL_SLOTS: tuple[Slot, ...] = tuple(
    replace(s, local=True)
    for s in (
        slot("RL_KELLY_FRACTION_INDEX", 665, "signal", 1.0, "keep",
           "kelly_f after resurrection; the observer reads the prior step's value",
           producer=_KELLY, consumers=(_OBS, "position sizing")),
        slot("RL_KELLY_ANALYTIC_INDEX", 666, "signal", 1.0, "keep",
           "analytic Kelly (model) before the resurrection override", producer=_KELLY),
        slot("RL_KELLY_EDGE_INPUT_INDEX", 667, "input", 0.0, "keep",
           "full-Kelly edge p − (1−p)·L/W of this step (stream kelly_analytic)",
           producer=_HOST, consumers=(_KELLY,)),
        slot("RL_KELLY_SAFETY_FRAC_INDEX", 668, "state", 0.50, "align",
           "Kelly safety fraction; v9 sets it defensive at a boundary and ramps it back",
           align_to="RL_V9_KELLY_SAFETY_FRAC_DEFENSIVE_INDEX", producer=_V9,
           consumers=(_KELLY,)),
        slot("RL_KELLY_CAP_INDEX", 669, "config", 1.0, "keep",
           "upper clamp of the analytic Kelly fraction", producer=_CFG, consumers=(_KELLY,)),
        slot("RL_COOLDOWN_REMAINING_STEPS_INDEX", 670, "input", 0.0, "keep",
           "drawdown cooldown steps left (stream cooldown)", producer=_HOST,
           consumers=(_OBS,)),
        slot("RL_SESSION_PNL_WORST_INDEX", 671, "input", 0.0, "keep",
           "worst session pnl across accounts (stream session_pnl_worst)",
           producer=_HOST, consumers=(_OBS, _RESET)),
        slot("RL_IQN_ACTION_TAU_MIN_INDEX", 672, "config", 0.10, "keep",
           "IQN τ_min before the tail boost", producer=_CFG, consumers=(_TAU,)),
        slot("RL_IQN_TAU_MIN_EFFECTIVE_INDEX", 673, "signal", 0.10, "keep",
           "τ_min after the tail boost", producer=_TAU),
        slot("RL_IQN_TAU_ACTION_INPUT_INDEX", 674, "input", 0.0, "keep",
           "IQN τ chosen by the policy, before the clamp (stream tau_action)",
           producer=_HOST, consumers=(_TAU,)),
        slot("RL_IQN_TAU_ACTION_INDEX", 675, "signal", 0.0, "keep",
           "IQN τ after the clamp max(τ, τ_min_eff)", producer=_TAU),
        slot("POPART_MEAN_INDEX", 676, "state", 0.0, "keep",
           "PopArt EMA mean μ", producer=_POP, consumers=(_POP, "rl_popart_v_correct")),
        slot("POPART_VAR_INDEX", 677, "state", 1.0, "keep",
           "PopArt EMA variance", producer=_POP, consumers=(_POP,)),
        slot("POPART_SIGMA_INDEX", 678, "signal", 1.0, "keep",
           "PopArt σ written after the envelope floor (σ_effective)", producer=_POP,
           consumers=("rl_popart_v_correct", "c51 atom span")),
        slot("POPART_ALPHA_INDEX", 679, "config", 0.001, "keep",
           "PopArt EMA α", producer=_CFG, consumers=(_POP,)),
        slot("POPART_PREV_MEAN_INDEX", 680, "state", 0.0, "keep",
           "μ before this step's update (v_correct's μ_old)", producer=_POP,
           consumers=("rl_popart_v_correct",)),
        slot("POPART_PREV_SIGMA_INDEX", 681, "state", 1.0, "keep",
           "σ before this step's update (v_correct's σ_old)", producer=_POP,
           consumers=("rl_popart_v_correct",)),
        slot("RL_REGIME_FEATURE_RESURRECTION_INDEX", 682, "config", 1.0, "keep",
           "switch F2: 0 turns the Kelly resurrection block off", producer=_CFG,
           consumers=(_KELLY,)),
        slot("RL_REGIME_FEATURE_ENVELOPE_INDEX", 683, "config", 1.0, "keep",
           "switch F4: 0 turns the PopArt max-|r| envelope floor off", producer=_CFG,
           consumers=(_POP,)),
        slot("RL_REGIME_FEATURE_TAU_BOOST_INDEX", 684, "config", 1.0, "keep",
           "switch F5: 0 turns the IQN τ tail boost off", producer=_CFG,
           consumers=(_TAU,)),
    )
)


@dataclass(frozen=True)
class LayoutReport:
    """Overlaps and gaps of a layout.

    Attributes
    ----------
    overlaps
        ``{index: [names]}`` for every index claimed by more than one slot.
    gaps
        ``[(start, stop)]`` half-open ranges of unused indices between the
        lowest and highest used index.
    """

    overlaps: dict[int, list[str]]
    gaps: list[tuple[int, int]]

    @property
    def ok(self) -> bool:
        return not self.overlaps

    def lines(self) -> list[str]:
        out = [f"overlap at [{i}]: {', '.join(names)}" for i, names in sorted(self.overlaps.items())]
        out += [f"gap [{a}..{b})" for a, b in self.gaps]
        return out or ["no overlaps, no gaps"]


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64-bit hash of ``data``."""
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@dataclass(frozen=True)
class SlotLayout:
    """An immutable set of slots with unique names.

    Use :data:`DEFAULT_LAYOUT` or :func:`import_rust` to get one.
    """

    slots: tuple[Slot, ...]
    _by_name: Mapping[str, Slot] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        by_name: dict[str, Slot] = {}
        for s in self.slots:
            if s.name in by_name:
                raise SlotLayoutError(f"slot name {s.name!r} declared twice", field=s.name)
            if s.role not in ROLES:
                raise SlotLayoutError(f"slot {s.name}: role {s.role!r} not in {ROLES}",
                                      field=s.name, value=s.role)
            if s.policy not in POLICIES:
                raise SlotLayoutError(f"slot {s.name}: policy {s.policy!r} not in {POLICIES}",
                                      field=s.name, value=s.policy)
            if s.index < 0:
                raise SlotLayoutError(f"slot {s.name}: negative index {s.index}",
                                      field=s.name, value=s.index)
            by_name[s.name] = s
        for s in self.slots:
            if s.policy == "align" and s.align_to not in by_name:
                raise SlotLayoutError(f"slot {s.name} aligns to unknown slot {s.align_to!r}",
                                      field=s.name, value=s.align_to)
        object.__setattr__(self, "_by_name", by_name)

    # ---- lookup -----------------------------------------------------------
    def __getitem__(self, name: str) -> Slot:
        try:
            return self._by_name[name]
        except KeyError:
            raise SlotLayoutError(f"unknown slot {name!r}", field=name, value=name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self):
        return iter(self.slots)

    def __len__(self) -> int:
        return len(self.slots)

    def index(self, name: str) -> int:
        """Index of slot ``name``."""
        return self[name].index

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.slots]

    @property
    def size(self) -> int:
        """Length of the ISV buffer: max(RL_SLOTS_END, highest index + 1)."""
        return max(RL_SLOTS_END, max(s.index for s in self.slots) + 1)

    # ---- derived artefacts ---------------------------------------------------
    def report(self) -> LayoutReport:
        """Overlapping indices and unused ranges between the lowest and highest index."""
        claim: dict[int, list[str]] = {}
        for s in self.slots:
            claim.setdefault(s.index, []).append(s.name)
        overlaps = {i: names for i, names in claim.items() if len(names) > 1}
        used = sorted(claim)
        gaps = [(a + 1, b) for a, b in zip(used, used[1:]) if b > a + 1]
        return LayoutReport(overlaps, gaps)

    def validate(self) -> "SlotLayout":
        """Raise :class:`SlotLayoutError` when two slots share an index."""
        rep = self.report()
        if rep.overlaps:
            raise SlotLayoutError("slot layout has overlapping indices: " + "; ".join(rep.lines()),
                                  field="index", value=rep.overlaps)
        return self

    def fingerprint(self) -> int:
        """FNV-1a 64 over the sorted ``NAME=INDEX`` lines, each ending in ``\\n``."""
        text = "".join(f"{line}\n" for line in sorted(f"{s.name}={s.index}" for s in self.slots))
        return fnv1a64(text.encode("ascii"))

    def fingerprint_hex(self) -> str:
        return f"{self.fingerprint():016x}"

    def defines(self) -> list[str]:
        """The ``-D`` options every kernel compiles with (one per slot, plus ISV size)."""
        self.validate()
        out = [f"-D{s.name}={s.index}" for s in self.slots]
        out.append(f"-DRL_SLOTS_END={RL_SLOTS_END}")
        out.append(f"-DISV_SIZE={self.size}")
        return out

    def bootstrap_vector(self, overrides: Mapping[str, float] | None = None) -> np.ndarray:
        """The float32 ISV buffer at training start, then ``overrides`` by slot name."""
        self.validate()
        isv = np.zeros(self.size, dtype=np.float32)
        for s in self.slots:
            isv[s.index] = np.float32(s.bootstrap)
        for name, value in (overrides or {}).items():
            isv[self.index(name)] = np.float32(value)
        return isv

    def reset_plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(index, policy_code, source_index)`` int32 arrays of the slots a boundary touches.

        Slots with policy ``keep`` are left out. ``source_index`` is the
        ``align_to`` slot for ``align`` and the slot itself otherwise. Clears
        and re-bootstraps come before aligns so an aligned value never reads a
        slot this same reset is about to rewrite.
        """
        rows = [s for s in self.slots if s.policy != "keep"]
        rows.sort(key=lambda s: (s.policy == "align", s.index))
        idx = np.array([s.index for s in rows], dtype=np.int32)
        code = np.array([POLICY_CODES[s.policy] for s in rows], dtype=np.int32)
        src = np.array([self.index(s.align_to) if s.policy == "align" else s.index for s in rows],
                       dtype=np.int32)
        return idx, code, src

    def with_indices(self, mapping: Mapping[str, int]) -> "SlotLayout":
        """A copy with the indices of the named slots replaced."""
        for name in mapping:
            self[name]  # unknown names raise
        return SlotLayout(tuple(replace(s, index=int(mapping[s.name])) if s.name in mapping else s
                                for s in self.slots))

    def table(self) -> list[dict]:
        """One dict per slot, sorted by index (for frames and the Slots page)."""
        return [
            {"index": s.index, "name": s.name, "role": s.role, "bootstrap": s.bootstrap,
             "policy": s.policy if s.policy != "align" else f"align → {s.align_to}",
             "local": s.local, "producer": s.producer, "consumers": ", ".join(s.consumers),
             "doc": s.doc}
            for s in sorted(self.slots, key=lambda s: (s.index, s.name))
        ]


DEFAULT_LAYOUT = SlotLayout(SPEC_SLOTS + V9_SLOTS + LOCAL_SLOTS)

_RUST_CONST = re.compile(r"^\s*pub\s+const\s+([A-Za-z_][A-Za-z0-9_]*)\s*:\s*usize\s*=\s*([0-9][0-9_xXa-fA-F]*)\s*;")


@dataclass(frozen=True)
class RustImport:
    """Result of :func:`import_rust`.

    Attributes
    ----------
    layout
        The registry with every known name moved to the file's index.
    replaced
        ``{name: (old, new)}`` for each index the file changed.
    unknown
        Constants in the file that the registry does not know (ignored).
    missing
        Registry slots the file does not mention (keep their default index).
    """

    layout: SlotLayout
    replaced: dict[str, tuple[int, int]]
    unknown: list[str]
    missing: list[str]


def import_rust(text: str, base: SlotLayout = DEFAULT_LAYOUT) -> RustImport:
    """Read ``pub const NAME: usize = N;`` lines of an ``isv_slots.rs``.

    Every other line is ignored. Names the registry knows take the file's
    index; the rest are reported as unknown, and registry names the file
    lacks are reported as missing.

    Raises
    ------
    SlotLayoutError
        If the file defines no ``usize`` constant at all, or one name twice
        with different values.
    """
    found: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _RUST_CONST.match(line)
        if not m:
            continue
        name, raw = m.group(1), m.group(2).replace("_", "")
        try:
            value = int(raw, 0)
        except ValueError:
            raise SlotLayoutError(f"line {lineno}: {name} = {m.group(2)!r} is not an integer",
                                  field=name, value=m.group(2)) from None
        if name in found and found[name] != value:
            raise SlotLayoutError(f"line {lineno}: {name} defined twice ({found[name]} and {value})",
                                  field=name, value=value)
        found[name] = value
    if not found:
        raise SlotLayoutError("no `pub const NAME: usize = N;` line found in the file",
                              field="isv_slots.rs", value=text[:80])
    known = {n: v for n, v in found.items() if n in base}
    replaced = {n: (base.index(n), v) for n, v in known.items() if base.index(n) != v}
    unknown = sorted(n for n in found if n not in base and n != "RL_SLOTS_END")
    missing = sorted(n for n in base.names if n not in found)
    return RustImport(base.with_indices(known), replaced, unknown, missing)
