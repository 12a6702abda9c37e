"""The deploy's DeployCleanup function: where every failed deploy ends, and the way back after a failed smoke
test (deploy_way_back.py)."""
