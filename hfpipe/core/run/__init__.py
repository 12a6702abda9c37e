"""A training run: the plan (built and typed), the CreateTrainingJob request, its logs, quotas, and the
clean-up of what a run created."""
