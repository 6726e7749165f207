"""Real agent clients against a stand-in model server (issue 10)."""
