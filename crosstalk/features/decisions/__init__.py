"""Decisions announced to every member (issue 19 item 6), and ``decisions`` to list them."""
