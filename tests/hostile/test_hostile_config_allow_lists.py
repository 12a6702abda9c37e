"""cdk.json's allow-lists: the only way a recipe may use buckets or registries outside its environment."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.config import ConfigError, parse_environment

DEV = {"region": "eu-west-1"}

# (key, value, fragments of the error)
# fmt: off
CASES: list[tuple[str, Any, list[str]]] = [
    ("allowed_s3_buckets", "shared-data", ["hfpipe:environments.dev.allowed_s3_buckets", "'shared-data'", "a list of S3 bucket names"]),
    ("allowed_s3_buckets", ["s3://shared-data"], ["allowed_s3_buckets", "['s3://shared-data']", "bucket names"]),
    ("allowed_s3_buckets", ["Shared_Data"], ["allowed_s3_buckets", "['Shared_Data']"]),
    ("allowed_s3_buckets", ["*"], ["allowed_s3_buckets", "['*']"]),
    ("allowed_s3_buckets", [""], ["allowed_s3_buckets", "['']"]),
    ("allowed_s3_buckets", [5], ["allowed_s3_buckets", "[5]"]),
    ("allowed_image_registries", "docker.io", ["allowed_image_registries", "'docker.io'", "a list of container registry hosts"]),
    ("allowed_image_registries", ["*.amazonaws.com"], ["allowed_image_registries", "['*.amazonaws.com']"]),
    ("allowed_image_registries", ["https://registry.example"], ["allowed_image_registries", "https://registry.example"]),
    ("allowed_image_registries", ["registry.example/path"], ["allowed_image_registries", "registry.example/path"]),
    ("allowed_image_registries", [None], ["allowed_image_registries", "[None]"]),
]
# fmt: on


@pytest.mark.parametrize(("key", "value", "fragments"), CASES, ids=[f"k{i}" for i in range(len(CASES))])
def test_allow_list_refused(key: str, value: Any, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment("dev", {**DEV, key: value})
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_allow_lists_default_to_nothing_and_keep_what_is_given() -> None:
    assert parse_environment("dev", DEV).allowed_s3_buckets == ()
    config = parse_environment(
        "dev",
        {**DEV, "allowed_s3_buckets": ["shared-data"], "allowed_image_registries": ["registry.example:5000"]},
    )
    assert (config.allowed_s3_buckets, config.allowed_image_registries) == (
        ("shared-data",),
        ("registry.example:5000",),
    )
