"""The model registry from the command: an environment's model versions and deciding on them, and
promoting an approved version into another environment."""
