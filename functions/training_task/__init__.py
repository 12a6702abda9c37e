"""The training task's hand-over that Launch and OnTrainingEvent both do: its run-time side (task.py) and its
grants (construct.py)."""
