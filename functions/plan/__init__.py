"""The Plan function: validates an execution's input and builds its plan (hfpipe.core.run.plan)."""
