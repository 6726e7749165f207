"""One package per feature: its sans-IO rules (``core``), its SQL (``queries``), its actors."""
