"""The Report function: the execution's report (cost, metrics, artifacts), published to the topic."""
