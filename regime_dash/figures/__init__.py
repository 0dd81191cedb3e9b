"""Plotly figures: frames and verdicts in, figures out (``signals``, ``overlay``, ``duty``,
``compare``, ``custom``, ``sensitivity``; ``plotly_arrays`` encodes typed arrays)."""
