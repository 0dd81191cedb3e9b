"""The source arguments of ``replay``, ``sweep`` and ``sensitivity`` (``--scenario``, ``--stream``,
``--simulate``, ``--steps``, ``--accounts``, ``--seed``) as a :class:`~regime_dash.usecases.sources.StreamSource`."""
from __future__ import annotations

import argparse


def source_of(args: argparse.Namespace):
    """The :class:`~regime_dash.usecases.sources.StreamSource` the source arguments name."""
    from regime_dash.usecases.sources import StreamSource

    return StreamSource(scenario=getattr(args, "scenario", None), stream=getattr(args, "stream", None),
                        simulate=getattr(args, "simulate", None), steps=args.steps, accounts=args.accounts,
                        seed=args.seed)


__all__ = ["source_of"]
