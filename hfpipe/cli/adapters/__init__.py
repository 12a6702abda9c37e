"""LoRA adapters on an environment's shared base from the command: deploying, rolling back or deleting
one, what each costs on its endpoint, and where an adapter run is served."""
