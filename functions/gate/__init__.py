"""The Gate function: the recipe's final metric against its threshold."""
