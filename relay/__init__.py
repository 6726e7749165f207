"""The crosstalk relay: routes sealed room ops between members and keeps what it could not deliver."""
