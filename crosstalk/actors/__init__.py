"""The daemon's Trio actors and their supervisor: thin shells that own I/O and time."""
