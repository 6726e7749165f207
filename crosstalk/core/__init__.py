"""Sans-IO cores: every rule of the system as pure code (no I/O, clocks or randomness)."""
