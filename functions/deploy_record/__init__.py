"""The deploy's Record function: tags the named endpoint, writes the deployment record and applies the
declared autoscaling."""
