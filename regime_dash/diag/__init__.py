"""The diag format: the one column catalogue (``catalogue``), diag.jsonl written column by
column (``jsonl``), signal aliases (``aliases``) and a chart's panel set (``panel_set``)."""
