"""The run store: runs kept as Parquet with their metadata, behind one façade (``run_store.RunStore``).

Its parts: ``paths`` (run ids, folders, staging), ``lock`` (the store's lock), ``writer`` (an ingest
staged and committed, a delete), ``parts`` (Parquet parts written), ``reader`` (tables, frames,
rejects), ``metadata`` (``_meta.json``, listing and naming runs), ``quarantine``, ``failures`` (I/O
failures said in one line), ``ingest_result``; and beside them followed runs' commits (``append``),
labels, layouts, the doctor and the download export."""
