"""Asks that end without an answer: the asker tells the room, the receiver's notice goes."""
