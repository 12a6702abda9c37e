"""Deploying a model version to an endpoint: the deploy plan, its requests and limits, deployment
settings, fleets, and what an endpoint serves."""
