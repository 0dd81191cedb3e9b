"""The ISV slot registry: the single source of slot indices.

Every slot the regime-observer spec reads or writes is declared once, in the
table ``slots.csv`` beside this module (read by :func:`read_table`, which also
reads each controller module's own table), with its index, role, bootstrap
value and boundary policy. Kernels get the indices as
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
* ``663..664``: **local model** switches (``RL_REGIME_MODEL_*``): what-if readings
  of the spec that are not in its code (docs/SPEC_NOTES.md). Off (0, the
  bootstrap) is the spec's code exactly; a trainer's layout does not have them.
* ``661..662``: **local mirror** switches (``RL_FUSED_MIRROR_*``) of the fused
  path (``rl_fused_controllers``): on (1, the bootstrap) is the spec's mirror;
  off leaves the F5 or F2 block out of the fused copy, a what-if of a trainer
  whose fused kernel was never updated. The single kernels never read them.

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

import csv
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from regime_dash.core.params import F32_MAX, F32_TINY, float32_problem
from regime_dash.errors import SlotLayoutError
from regime_dash.text import clip

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
    name, index
        The spec's constant name (e.g. ``RL_REGIME_DEAD_ZONE_FLAG_INDEX``) and
        the slot's position in the float32 ISV buffer.
    role
        ``signal`` (emitted each step), ``state`` (internal, carried between
        steps), ``config`` (set once, what-if knobs) or ``input`` (written from
        the replayed stream each step).
    bootstrap, policy
        Value at training start (the spec's bootstrap list) and the boundary
        policy, one of :data:`POLICIES`.
    doc
        One line saying what the slot holds.
    local
        True when the spec reads the slot but does not number it.
    align_to
        For ``policy == "align"``: the slot whose value is copied.
    producer, consumers
        The kernel (or host side) that writes the slot and those that read it;
        a slot with consumers and no producer is an orphan
        (:func:`regime_dash.modules.orphan_slots`).
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


def slot_defines(slots: Iterable[Slot]) -> list[str]:
    """``-D{name}={index}`` of each slot: how a kernel learns the indices it reads and writes."""
    return [f"-D{s.name}={s.index}" for s in slots]


#: The columns of a slot table file, in order (see :func:`read_table`).
TABLE_COLUMNS = ("name", "index", "role", "bootstrap", "policy", "producer", "consumers", "align_to", "local",
                 "doc")


def _table_value(column: str, text: str):
    if column == "index":
        return int(text)
    if column == "bootstrap":
        value = float(text)
        if not math.isfinite(value) or float32_problem(value) is not None:
            raise ValueError(text)  # the ISV buffer is float32: a bootstrap it would not hold as written
        return value
    if column == "consumers":
        return tuple(c for c in text.split("|") if c)
    if column == "align_to":
        return text or None
    if column == "local":
        return {"true": True, "false": False}[text]
    return text


def _cell_kind(column: str) -> str:
    """What a cell of ``column`` must be (for the message that refuses one)."""
    if column == "local":
        return "true or false"
    if column == "bootstrap":
        return f"a number a float32 slot holds (0, or a magnitude from {F32_TINY:.8g} to {F32_MAX:.8g})"
    return "a number"


def read_table(path: str | Path) -> tuple[Slot, ...]:
    """The slots of a slot table: a CSV file, one slot a row, in file order.

    The header row names :data:`TABLE_COLUMNS`; lines starting with ``#`` are
    comments. ``consumers`` are separated by ``|``, ``align_to`` is empty unless
    the policy is ``align``, ``local`` is ``true`` or ``false``. Roles and
    policies are checked where the slots become a :class:`SlotLayout`.

    Raises
    ------
    SlotLayoutError
        For a wrong header, a missing or extra cell, or a cell that is not of its
        column's type; the message names the file, line, column and value.
    """
    path = Path(path)
    numbered = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if line.strip() and not line.startswith("#")]
    rows = csv.reader([line for _, line in numbered])
    header = next(rows, [])
    if tuple(header) != TABLE_COLUMNS:
        raise SlotLayoutError(f"{path.name}: the header is {header!r}, not {list(TABLE_COLUMNS)!r}",
                              field="header", value=header)
    out = []
    for (line_no, _), row in zip(numbered[1:], rows):
        if len(row) != len(TABLE_COLUMNS):
            raise SlotLayoutError(f"{path.name}:{line_no}: {len(row)} cells, not {len(TABLE_COLUMNS)}",
                                  field="row", value=row)
        cells = {}
        for column, text in zip(TABLE_COLUMNS, row):
            try:
                cells[column] = _table_value(column, text)
            except (ValueError, KeyError):
                raise SlotLayoutError(f"{path.name}:{line_no}: {column} {text!r} is not "
                                      f"{_cell_kind(column)}",
                                      field=column, value=text) from None
        out.append(Slot(**cells))
    return tuple(out)


def table_beside(module_file: str | Path) -> tuple[tuple[Slot, ...], dict[str, int]]:
    """The slots of the ``slots.csv`` in the folder of ``module_file`` (a ``__file__``), and their indices by name."""
    slots = read_table(Path(module_file).with_name("slots.csv"))
    return slots, {s.name: s.index for s in slots}


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
        out = slot_defines(self.slots)
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


#: The spec's layout: the registry table ``slots.csv`` beside this module.
DEFAULT_LAYOUT = SlotLayout(table_beside(__file__)[0])

def _clip40(text: str) -> str:
    return clip(text, 40)


#: The largest slot index an imported layout may give (the ISV buffer is sized to the
#: highest index + 1: 65,536 float32 slots are 256 KB; the spec's layout ends at 716).
MAX_SLOT_INDEX = 65_535


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
        shown = _clip40(m.group(2))
        try:
            value = int(raw, 0) if len(raw) <= 20 else None
        except ValueError:
            raise SlotLayoutError(f"line {lineno}: {_clip40(name)} = {shown!r} is not an integer",
                                  field=_clip40(name), value=shown) from None
        if value is None or value > MAX_SLOT_INDEX:
            # an ISV buffer is allocated up to the highest index: gigabytes for a huge one
            raise SlotLayoutError(f"line {lineno}: {_clip40(name)} = {shown} is past the largest slot index "
                                  f"{MAX_SLOT_INDEX:,}", field=_clip40(name), value=shown)
        if name in found and found[name] != value:
            raise SlotLayoutError(f"line {lineno}: {_clip40(name)} defined twice ({found[name]} and {value})",
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
