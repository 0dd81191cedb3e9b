"""Where replay inputs come from: the synthetic market (``market``, ``market_jit``), the
scenario presets (``scenarios``), the closed-loop simulator (``simulator``,
``simulator_jit``) and the committed samples (``samples``)."""
