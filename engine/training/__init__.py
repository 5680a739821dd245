"""Training of the shipped draft/target pair and the corpora it reads."""
