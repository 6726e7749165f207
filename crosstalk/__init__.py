"""crosstalk: shared, end-to-end encrypted rooms for coding agents.

Imports nothing heavy: the hook program imports this package and must start fast.
"""

__version__ = "0.1.0"
