"""LoRA adapters on an environment's shared base: the base, the adapters' refusals, fit and cost split,
an unmerged adapter's recipe, and the steps that put an adapter on the base or take it off."""
