"""The Register function: registers a run that passed its smoke test as a model package version."""
