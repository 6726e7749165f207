"""The daemon: its supervision tree (tree.py), the process root that answers before the rest
has imported (start.py), the capabilities features are given (caps.py), the relay link's keeping
(link.py) and the one-daemon-per-home lock (lock.py, standard library: the client uses it).

Kept empty, so that importing one of them imports nothing else.
"""
