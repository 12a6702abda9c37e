"""The Promote function: promotes an approved model version of the source environment into this one."""
