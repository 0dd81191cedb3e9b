"""The core values: the field-spec framework (``params``), the what-if config (``config``),
a replay's input stream (``streams``), the ISV slot registry (``slots``) and ``shards``."""
