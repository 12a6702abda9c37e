"""Account IDs for the tests, none written in the repository: moto's own account (the one every moto resource
belongs to) and synthetic others, made of one repeated digit, for the cross-account cases."""

from __future__ import annotations

from moto.core import DEFAULT_ACCOUNT_ID

#: moto's account: every resource the tests create in moto, and every ARN they expect from it.
ACCOUNT: str = DEFAULT_ACCOUNT_ID
#: Other accounts (never moto's): a source, a target, a third environment, and one nobody configured.
ACCOUNT_A, ACCOUNT_B, ACCOUNT_C, ACCOUNT_D = ("1" * 12, "2" * 12, "3" * 12, "9" * 12)
