"""Following growing diag files into the store: ``tail`` reads, ``follower`` parses,
commits, judges and alerts (``alerts``), ``live_frame`` holds a followed run for a reader."""
