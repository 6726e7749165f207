"""Room membership: every member's roster follows the relay's, checked against signatures."""
