"""`crosstalk doctor`: checks as data (checks.py), client rows (clients.py), the report."""
