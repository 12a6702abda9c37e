"""Names, ARNs and ids are matched whole, as AWS matches its patterns (botocore's model: whole-value), never
with Python's ``$``, which also matches before a final newline: ``re.match(r"^a$", "a\\n")`` matches. One test
per family of patterns, each with the value and a newline after it; and a scan of hfpipe/, lambda/ and
stacks/ that no pattern ending in ``$`` is used with ``match`` or ``search``. The adapter component's length
(botocore's InferenceComponentName: at most 63) is checked before anything is made, naming the longest
adapter name the environment accepts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from accounts import ACCOUNT_A, ACCOUNT_B

from hfpipe.cli.aws import HfpipeError, validate_execution_name
from hfpipe.cli.recipe.data import validate_name
from hfpipe.core import names
from hfpipe.core.adapters import adapter_deploy
from hfpipe.core.adapters.adapter_deploy import AdapterRefused
from hfpipe.core.deploy import deployments
from hfpipe.core.promotion import promotion, registry
from hfpipe.core.run import logs
from stacks.config import ConfigError, parse_environment

ROOT = Path(__file__).resolve().parents[2]
NL = "\n"


def test_an_adapter_name_with_a_newline_is_refused_not_a_second_component():
    assert adapter_deploy.component_name("dev", "support") == "hfpipe-dev-adapter-support"
    with pytest.raises(AdapterRefused, match="--adapter: 'support\\\\n' is not accepted"):
        adapter_deploy.component_name("dev", "support" + NL)


def test_the_component_names_length_is_checked_with_the_longest_adapter_name_of_the_environment():
    env = "abcdefghijklmnop"  # 16 characters: hfpipe-<env>-adapter- is 32
    assert adapter_deploy.longest_adapter_name(env) == 31
    assert adapter_deploy.longest_adapter_name("dev") == 32
    assert len(adapter_deploy.component_name(env, "a" * 31)) == 63
    with pytest.raises(AdapterRefused) as refused:
        adapter_deploy.component_name(env, "a" * 32)
    message = str(refused.value)
    assert message.startswith("--adapter: ")
    assert "of 64 characters" in message
    assert "InferenceComponentName of at most 63" in message
    assert "an adapter name of at most 31 characters in environment 'abcdefghijklmnop'" in message


def test_a_named_endpoint_name_with_a_newline_is_refused():
    entry = {"summaries": {"instance_count": 1}}
    assert deployments.parse_endpoints("dev", entry, "p")[0].name == "summaries"
    with pytest.raises(deployments.EndpointSettingsError, match=r"p: .summaries\\n. is not accepted"):
        deployments.parse_endpoints("dev", {"summaries" + NL: {"instance_count": 1}}, "p")


def test_version_references_and_arns_with_a_newline_are_refused():
    arn = f"arn:aws:sagemaker:eu-west-1:{ACCOUNT_A}:model-package/hfpipe-dev-tiny/3"
    assert registry.parse_ref(arn, "dev") == ("hfpipe-dev-tiny", 3)
    assert registry.parse_ref("tiny/3", "dev") == ("hfpipe-dev-tiny", 3)
    for ref in (arn + NL, "tiny/3" + NL):
        with pytest.raises(registry.RegistryRefError, match="not accepted"):
            registry.parse_ref(ref, "dev")
    assert registry.ref_of_arn(arn + NL, "dev") == arn + NL  # not read as a version of dev's


def test_command_line_names_with_a_newline_are_refused():
    assert validate_execution_name("run-1") == "run-1"
    assert validate_name("samsum") == "samsum"
    with pytest.raises(HfpipeError, match="not a valid execution name"):
        validate_execution_name("run-1" + NL)
    with pytest.raises(HfpipeError, match="not a valid data set name"):
        validate_name("samsum" + NL)


def test_cdk_json_region_account_buckets_registries_and_shared_base_with_a_newline_are_refused():
    good = {"region": "eu-west-1", "account": ACCOUNT_A}
    assert parse_environment("dev", good).region == "eu-west-1"
    base = {"base_model": "my-org/base-8b", "instance_type": "ml.g5.4xlarge", "max_adapters": 2}
    for bad, field in (
        ({"region": "eu-west-1" + NL}, "dev.region"),
        ({**good, "account": ACCOUNT_A + NL}, "dev.account"),
        ({**good, "allowed_s3_buckets": ["my-bucket" + NL]}, "dev.allowed_s3_buckets"),
        ({**good, "allowed_image_registries": ["ghcr.io" + NL]}, "dev.allowed_image_registries"),
        ({**good, "shared_base": {**base, "base_model": "my-org/base-8b" + NL}}, "shared_base.base_model"),
        (
            {**good, "shared_base": {**base, "instance_type": "ml.g5.4xlarge" + NL}},
            "shared_base.instance_type",
        ),
    ):
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            parse_environment("dev", bad)


def test_image_uris_sagemaker_names_and_log_streams_are_matched_whole():
    image = f"{ACCOUNT_B}.dkr.ecr.eu-west-1.amazonaws.com/huggingface-pytorch-inference:2.1-gpu"
    catalog = {"hf": {"2.1": {"gpu": image}}}
    assert promotion.target_image(image, catalog) == image
    with pytest.raises(promotion.PromotionRefused):
        promotion.target_image(image + NL, catalog)
    assert names.derive_names("run-1", "dev")["endpoint_name"] == "dev-run-1-ep"
    assert logs.host_of("hfpipe-dev-run/algo-2-1700000000") == "algo-2"
    assert logs.host_of("hfpipe-dev-run/algo-2-1700000000" + NL) != "algo-2"


def _dollar_patterns(tree: ast.AST) -> tuple[set[str], list[int]]:
    """Names bound to ``re.compile`` of a literal that ends in an unescaped ``$``; lines of ``re.match`` or
    ``re.search`` given such a literal."""
    bound: set[str] = set()
    direct: list[int] = []

    def ends_in_dollar(node: ast.AST) -> bool:
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            return False
        text = node.value
        return text.endswith("$") and not text.endswith("\\$")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = node.func.value
            if (
                isinstance(owner, ast.Name)
                and owner.id == "re"
                and node.func.attr in ("match", "search")
                and ends_in_dollar(node.args[0])
            ):
                direct.append(node.lineno)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "compile"
                and call.args
                and ends_in_dollar(call.args[0])
            ):
                bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return bound, direct


def test_no_pattern_ending_in_dollar_is_used_with_match_or_search():
    found = []
    files = [ROOT / "app.py"] + [
        p for top in ("hfpipe", "lambda", "stacks") for p in sorted((ROOT / top).rglob("*.py"))
    ]
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        bound, direct = _dollar_patterns(tree)
        found += [f"{path.relative_to(ROOT)}:{line}: re.match/search with $" for line in direct]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("match", "search")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in bound
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.value.id}.{node.func.attr}")
    assert not found, "use fullmatch (or \\Z): " + "; ".join(found)
