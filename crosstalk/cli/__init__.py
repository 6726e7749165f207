"""The typer command line: each command parses its options, then calls one function."""
