"""What the functions share: their clients and logging (aws.py) and the deploy's reads and guards
(deploy_common.py, deploy_guards.py) at run time; the code asset, function settings and IAM helpers of their
constructs (construct.py)."""
