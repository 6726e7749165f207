"""One row of ``crosstalk doctor``: what was checked, whether it is fine, and what to do.

Its own module so that the rows about agent clients (:mod:`crosstalk.doctor.clients`) and the
doctor that gathers them (:mod:`crosstalk.doctor.report`) need not import each other.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str
