"""Wire models: attrs records for what crosses a process boundary, and the one cattrs converter."""
