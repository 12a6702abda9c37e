"""Endpoints from the command: a model version deployed to a named endpoint, the endpoints an
environment has and what they cost, and invoking one."""
