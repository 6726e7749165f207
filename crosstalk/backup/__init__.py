"""Backup and restore: one file, sealed under a passphrase, with a home's identity, state and
settings (``crosstalk backup FILE``, ``crosstalk restore FILE``).

- :mod:`.sealed`: the file format (header, argon2id, libsodium secretstream), streaming both ways.
- :mod:`.manifest`: what a backup holds, and what of a home it leaves out.
- :mod:`.take`: a consistent copy of a home, live daemon or not.
- :mod:`.restore`: back into a home with no identity, all or nothing.

This package sits beside the store (it reads and writes a home's files) and below the CLI; the
daemon never imports it.
"""
