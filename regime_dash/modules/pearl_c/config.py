"""PearlCConfig: the clamp, the launch shape, the tracking switch and the Pearls A+D α range."""
from __future__ import annotations

from dataclasses import dataclass

from regime_dash.errors import ConfigError
from regime_dash.modules.base import ModuleConfig, param


@dataclass(frozen=True)
class PearlCConfig(ModuleConfig):
    """Pearl C knobs. The 0.01 target rate is the commit's; ``model`` marks what it does not give."""

    clamp: float = param(1.0, 1e-6, 1e6, "clamp threshold on |update| (Mech 9's 100×Q_ABS_REF, in update units)",
                         model=True)
    block: int = param(256, 32, 1024, "threads per block (a power of two)", integer=True, step=32)
    blocks: int = param(0, 0, 65535, "blocks per step; 0 = ceil(n / block)", integer=True)
    tracking: bool = param(True, doc="engage_buf_offset ≥ 0; off = SP4_ENGAGE_OFFSET_DISABLED (−1), as TLOB "
                           "sharing attn_adam_kernel: the counts are never written")
    alpha_min: float = param(0.01, 1e-4, 1.0, "Pearl D Wiener-α floor", model=True)
    alpha_max: float = param(0.5, 1e-4, 1.0, "Pearl D Wiener-α ceiling", model=True)

    def _check(self) -> None:
        if self.block & (self.block - 1):
            raise ConfigError(f"block={self.block!r} is not a power of two (the tree reduction halves it)",
                              field="block", value=self.block)
        if self.alpha_min > self.alpha_max:
            raise ConfigError(f"alpha_min={self.alpha_min!r} is greater than alpha_max={self.alpha_max!r}",
                              field="alpha_min", value=(self.alpha_min, self.alpha_max))

    def grid(self, n: int) -> int:
        """Blocks per step for ``n`` parameters."""
        return grid_blocks(n, self.block, self.blocks)


def grid_blocks(n: int, block: int, blocks: int) -> int:
    """Blocks per step: ``blocks``, or ceil(n / block) when it is 0."""
    return blocks if blocks > 0 else max(1, -(-n // block))
