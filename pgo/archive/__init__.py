"""The profile archive: its model (entries, manifests, damage) and its store."""
