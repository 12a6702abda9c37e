"""The Cleanup function: both clean-up paths (a state machine task, and EventBridge's abnormal end of an
execution), through teardown.py."""
