"""What a target's Promote role reads of its source environment, and how a refusal of it is named.

The role reads the source version (DescribeModelPackage: granted by its own policy and, across accounts, by the
source group's resource policy, hfpipe.core.promotion.promotion.group_policy) and two kinds of objects of the source's
artifacts bucket (s3:GetObject under ``SOURCE_KEY_PREFIXES``: its own policy, stacks/functions/promote.py,
and across accounts the source bucket's statement ``bucket_statement_sid``, stacks/constructs/promotion.py).
A URL outside that grant is refused before any call (``readable_source``); a refused call is one line naming
the policy that lacks the grant and how to add it (``group_denied``, ``bucket_denied``); a missing object
names its key (``missing_object``).

Stdlib only: the Promote Lambda runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hfpipe import contract
from hfpipe.core.promotion import registry
from hfpipe.core.promotion.promotion import PromotionRefused, role_arn

#: The source artifacts bucket's keys the Promote role reads (its identity policy, stacks/functions/promote.py,
#: and the source's bucket statement, stacks/constructs/promotion.py): the training outputs, the metrics documents.
SOURCE_KEY_PREFIXES = (contract.ARTIFACTS_OUTPUT_PREFIX, contract.ARTIFACTS_MODEL_METRICS_PREFIX)
#: Error codes of a refused call: SageMaker's (AccessDeniedException), S3's (AccessDenied; a HEAD request has
#: no body, so HeadObject's is its status, 403).
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "403", "Forbidden"})


def source_bucket_prefix(source_env: str) -> str:
    """How the source's artifacts bucket is named: CloudFormation names it from its stack (<stack name in lower
    case>-<logical id>-<suffix>), so only this prefix is known at synth time."""
    return f"{contract.stack_name(source_env, 'Data').lower()}-"


def bucket_statement_sid(target_env: str) -> str:
    """The Sid of the source bucket's statement for a target in another account (``bucket_statement``)."""
    return f"PromoteTo{target_env.capitalize()}"


def readable_source(field: str, url: str, source_env: str) -> tuple[str, str]:
    """(bucket, key) of an s3:// URL of the source version that the Promote role may read: a key under
    ``SOURCE_KEY_PREFIXES`` of the source's artifacts bucket; else PromotionRefused, before any call (AWS
    would answer AccessDenied, naming neither the grant nor the key)."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    ours = url.startswith("s3://") and bucket.startswith(source_bucket_prefix(source_env))
    if ours and key.startswith(SOURCE_KEY_PREFIXES):
        return bucket, key
    raise PromotionRefused(
        f"{field} {url!r}: not readable by the Promote role; accepted: s3://{source_bucket_prefix(source_env)}"
        f"<suffix>/ (environment {source_env!r}'s artifacts bucket) with a key under "
        f"{' or '.join(SOURCE_KEY_PREFIXES)} (what its Register step records); nothing written"
    )


def missing_object(field: str, bucket: str, key: str, source_env: str) -> str:
    """The refusal of a source version whose object is gone (an S3 404, NoSuchKey)."""
    return (
        f"{field}: no object s3://{bucket}/{key} (key {key!r}) in environment {source_env!r}'s artifacts bucket; "
        "accepted: a version whose files are still there (deleted or expired: register the model again "
        f"in {source_env!r} and promote the new version); nothing written"
    )


@dataclass(frozen=True)
class Peers:
    """The target environment (its account: None when not known) and its source, as a refusal names them."""

    partition: str
    account: str | None
    source_account: str
    source_env: str
    target_env: str

    @property
    def promoter(self) -> str:
        if self.account is None:
            return f"environment {self.target_env!r}'s Promote role"
        return f"the Promote role {role_arn(self.partition, self.account, self.target_env)}"

    @property
    def same_account(self) -> bool | None:
        return None if self.account is None else self.account == self.source_account


def group_denied(version: str, code: str, peers: Peers) -> str:
    """The one-line refusal of DescribeModelPackage on a source version: which policy lacks the grant, and
    how to add it (both policies when the target's account is not known)."""
    source, target = peers.source_env, peers.target_env
    group = version.split(":model-package/", 1)[-1].rsplit("/", 1)[0]
    head = f"DescribeModelPackage {version}: access denied ({code})"
    own = (
        f"{peers.promoter}'s own policy lacks sagemaker:DescribeModelPackage on "
        f"model-package/{registry.group_prefix(source)}*/* (stacks/functions/promote.py): redeploy "
        f"{target!r} with `npx cdk deploy -c env={target} --all`"
    )
    shared = (
        f"the source group {group}'s resource policy does not allow "
        f"{peers.promoter} sagemaker:DescribeModelPackage: add it by deploying "
        f"{source!r} with {target!r}'s account in cdk.json (`npx cdk deploy -c env={source} --all`) "
        f"and registering a version of the group there (its Register step puts the policy), or now with "
        f"`aws sagemaker put-model-package-group-policy --model-package-group-name {group} "
        f'--resource-policy file://policy.json` (the policy: docs/promote.md, "Across accounts")'
    )
    return _refusal(head, own, shared, peers.same_account)


def bucket_denied(operation: str, bucket: str, key: str, code: str, peers: Peers) -> str:
    """The one-line refusal of a read of the source's bucket (GetObject, HeadObject, the copy's read): which
    policy lacks s3:GetObject on the key, and how to add it. Without s3:ListBucket (not granted), S3 answers
    a missing key with 403 too (HeadObject, GetObject: "If you don't have the s3:ListBucket permission,
    Amazon S3 returns an HTTP status code 403"), so the message says that as well."""
    source, target = peers.source_env, peers.target_env
    head = f"{operation} s3://{bucket}/{key}: access denied ({code})"
    own = (
        f"{peers.promoter}'s own policy lacks s3:GetObject on "
        f"{source_bucket_prefix(source)}*/{key.split('/', 1)[0]}/* (stacks/functions/promote.py): redeploy "
        f"{target!r} with `npx cdk deploy -c env={target} --all`"
    )
    shared = (
        f"the source bucket {bucket}'s policy does not allow {peers.promoter} "
        f"s3:GetObject on key {key!r}: add it by deploying {source!r} with {target!r}'s account in "
        f"cdk.json (`npx cdk deploy -c env={source} --all` adds the statement "
        f'{bucket_statement_sid(target)}), or add that statement by hand (docs/promote.md, "Across '
        'accounts")'
    )
    missing = (
        "; or the key does not exist (S3 answers 403 for a missing key to a caller without s3:ListBucket)"
    )
    return _refusal(head, own, shared, peers.same_account, missing)


def _refusal(head: str, own: str, shared: str, same_account: bool | None, missing: str = "") -> str:
    """The refusal's line: the target's own policy (the source's account), the source's resource policy
    (another account), or both (the target's account not known)."""
    if same_account:
        return f"{head}: {own}{missing}; nothing written"
    if same_account is not None:
        return f"{head}: {shared}{missing}; nothing written"
    return f"{head}: in one account, {own}; across accounts, {shared}{missing}; nothing written"
