"""The reply models of the control ops, one module per family of ops."""
