"""The Launch function: creates the plan's training job (idempotently) and keeps the waiting task's token."""
