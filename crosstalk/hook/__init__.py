"""The hook program and the standard-library-only control client it uses (it must start fast)."""
