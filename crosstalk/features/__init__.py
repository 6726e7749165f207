"""One package per feature, each exporting one frozen ``FEATURE`` (:mod:`.feature`): its op
handlers and ``plug`` (``ops.py``), its actors, its sans-IO rules (``core.py``). The daemon
plugs them in from :data:`crosstalk.features.registry.FEATURES`, in that order; what a feature
may ask of the daemon is :mod:`.caps`."""
