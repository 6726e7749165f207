"""The sections of ``docs/performance.md``, each built from a run's results; bench/report.py
puts them together with the hand-measured notes (bench/notes.py)."""
