"""Retention: finished history leaves ``state.db`` after a while (``crosstalk prune``)."""
