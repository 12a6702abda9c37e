"""The deploy's Prepare function: reads the registered version and the named endpoint, refuses what may not be
deployed, builds the deploy plan."""
