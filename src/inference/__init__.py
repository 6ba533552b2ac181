"""The numpy port of microgpt: whole sequences in one call (arrives with the numpy issue)."""
