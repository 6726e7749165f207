"""The MCP server: a stdlib front end, the SDK server, its tools and channel.

Kept empty: the front end (front.py) must import nothing but the standard library.
"""
