"""Work over many replays or runs: ``sweeps`` (many configs over one stream), ``scheduler``
(dask), ``sensitivity``, ``live`` runs, ``check_all`` and the runs table (``run_table``)."""
