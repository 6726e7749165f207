"""Slices: what a sender points at, built on a worker thread, with credentials refused."""
