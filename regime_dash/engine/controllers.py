"""The two risk-stack controller paths a replay can take: the single kernels or the fused one.

The spec's launch order has the risk-stack controllers as single kernels (step 7:
CMDP → IQN τ → Inventory β → Kelly) and ``rl_fused_controllers`` (step 8), which
"mirrors single-controller behavior". A replay runs one of the two:

``single``
    ``rl_iqn_action_tau_controller`` then ``rl_kelly_fraction_controller``.
``fused``
    ``rl_fused_controllers``: the same functions behind the mirror switches
    ``fused_mirror_tau_boost`` and ``fused_mirror_resurrection`` of
    :class:`~regime_dash.core.config.RegimeConfig` (on, the spec, it is the single
    path bit for bit).

Every engine takes ``controllers=``; the scans of the fast engine on the GPU
compile the path in (:data:`FUSED_DEFINE`), the per-step CUDA engine launches
its kernel, the reference and the fast CPU engine branch per step.
"""
from __future__ import annotations

from regime_dash.errors import ValidationError

#: The controller paths, the default first.
CONTROLLERS: tuple[str, ...] = ("single", "fused")
#: What each path runs, for listings (the Controllers page).
PATH_DOCS: dict[str, str] = {
    "single": "launch order step 7: rl_iqn_action_tau_controller (F5 τ boost) then rl_kelly_fraction_controller "
              "(F2 resurrection), one launch each",
    "fused": "launch order step 8: rl_fused_controllers, one launch in the spec's order CMDP → IQN τ → "
             "Inventory β → Kelly; modelled are its Layer-2 branch (IQN τ, the F5 boost mirrored: "
             "fused_mirror_tau_boost) and its Layer-4 branch (Kelly, the F2 resurrection mirrored: "
             "fused_mirror_resurrection); CMDP and Inventory β are not modelled. Replay page, "
             "replay --controllers fused",
}
#: The define that compiles a scan (``replay_scan.cu``, ``replay_sweep.cu``) for the fused path.
FUSED_DEFINE = "-DREPLAY_CONTROLLERS_FUSED=1"


def check_controllers(controllers: str) -> str:
    """``controllers`` when it names a path, else :class:`ValidationError` naming the value."""
    if not isinstance(controllers, str) or controllers not in CONTROLLERS:
        raise ValidationError(f"controllers must be one of {list(CONTROLLERS)}, got {controllers!r}",
                              field="controllers", value=controllers)
    return controllers


def path_options(controllers: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """NVRTC ``options`` for a scan compiled for the path ``controllers`` (checked)."""
    return (*options, FUSED_DEFINE) if check_controllers(controllers) == "fused" else tuple(options)
