"""A training run from the command: start (and its dry run), watch, list, the execution's state, its
report, logs and loss curves, and stopping it and cleaning up what it left."""
