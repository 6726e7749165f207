"""The crosstalk relay: routes sealed room ops between members, keeps what is undelivered."""
