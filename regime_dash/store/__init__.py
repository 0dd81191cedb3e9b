"""The run store: runs kept as Parquet with their metadata (``run_store``), followed runs'
commits (``append``), labels, layouts, the doctor and the download export."""
