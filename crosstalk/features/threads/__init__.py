"""Threads (issue 19 item 8): messages that belong together, shown in order, closed with a
summary that every participant is told."""
