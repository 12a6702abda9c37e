"""Recipes for the command: listing, showing and `--set` overrides, a data set checked against what a
recipe's script reads, and a recipe's own source (a folder or a git repository) packed and uploaded."""
