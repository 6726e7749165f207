"""Messages: ``send``, ``answer``, ``post`` and ``sent``; holding what arrives, taking receipts."""

from crosstalk.features.feature import Feature
from crosstalk.features.messages.ops import plug

FEATURE = Feature("messages", plug)
