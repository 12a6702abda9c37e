"""The model registry and promotion between environments: model package versions, the promote plan,
and what a promotion may reach."""
