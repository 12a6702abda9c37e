"""A recipe: its schema and field rules, loading and overrides, an own script's arguments and packed
source, the records a task reads, the sample request, and each serving kind's fit rule."""
