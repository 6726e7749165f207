"""Run a daemon in the foreground with one feature more than FEATURES, as if its line were added
at the end of the tuple: ``python -m tests.e2e.feature_daemon HOME MODULE`` (``MODULE``
exports ``FEATURE``). It prints the daemon's ready line, as ``crosstalk daemon run --json`` does.
"""

from __future__ import annotations

import importlib
import sys

from crosstalk.cli.daemon_main import run_foreground
from crosstalk.cli.output import Output
from crosstalk.features.feature import Feature
from crosstalk.features.registry import FEATURES
from crosstalk.paths import Home


def main(home: str, module: str) -> None:
    """Run the daemon of ``home`` with ``module.FEATURE`` plugged in last."""
    extra = importlib.import_module(module).FEATURE
    assert isinstance(extra, Feature), f"{module}.FEATURE is not a Feature"
    run_foreground(Home.resolve(home), Output(json_mode=True), detach=False,
                   features=(*FEATURES, extra))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
