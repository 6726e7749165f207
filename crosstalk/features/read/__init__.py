"""Reading: ``read`` hands out held messages under a lease, ``ack`` marks them read and owes the
``read`` receipts; the receipts actor posts what is owed."""

from crosstalk.features.feature import Feature
from crosstalk.features.read.ops import plug

FEATURE = Feature("read", plug)
