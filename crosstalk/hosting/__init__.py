"""Relays this machine runs for its daemons: the shared local one, and a quick tunnel."""
