"""The adapter state machine's function: LoRA adapter versions put on the environment's shared base, rolled
back or deleted."""
