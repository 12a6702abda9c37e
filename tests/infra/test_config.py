"""cdk.json environments: parsing, defaults and the exact messages a bad entry stops synth with."""

from __future__ import annotations

import copy
import json

import pytest
from accounts import ACCOUNT, ACCOUNT_A, ACCOUNT_B

import app as cdk_app
from stacks.config import (
    ConfigError,
    PromotionPeer,
    load_environments,
    parse_environment,
    select_environments,
)

DEV = {"region": "eu-west-1"}


def test_cdk_json_defines_dev_and_prod_covering_the_recipes(repo_root):
    context = json.loads((repo_root / "cdk.json").read_text())["context"]
    environments = load_environments(context["hfpipe:environments"])
    assert sorted(environments) == ["dev", "prod"]
    assert environments["prod"].retain and not environments["dev"].retain
    for env in environments.values():
        names = {q.name for q in env.quotas}
        assert {"ml.g5.2xlarge for training job usage", "ml.g5.4xlarge for endpoint usage"} <= names
        assert any("spot training job usage" in n for n in names)
        # The data-parallel recipe (bert-large-squad-ddp) trains on two ml.p3.16xlarge instances.
        targets = {q.name: q.value for q in env.quotas}
        assert targets.get("ml.p3.16xlarge for training job usage", 0) >= 2


def test_defaults_and_account_fallback():
    env = parse_environment("dev", DEV, default_account=ACCOUNT)
    assert (env.region, env.account, env.removal_policy, env.log_retention_days) == (
        "eu-west-1",
        ACCOUNT,
        "retain",
        365,
    )
    assert env.quotas == ()
    explicit = parse_environment("dev", {**DEV, "account": ACCOUNT_A}, default_account=ACCOUNT)
    assert explicit.account == ACCOUNT_A
    assert parse_environment("dev", DEV).account is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {},
            'hfpipe:environments.dev.region: required; accepted: an AWS region name such as "eu-west-1"',
        ),
        (
            {"region": "Ireland"},
            "hfpipe:environments.dev.region: 'Ireland' is not accepted; accepted: an AWS region name such as "
            '"eu-west-1"',
        ),
        (
            {**DEV, "account": int(ACCOUNT)},
            f"hfpipe:environments.dev.account: {ACCOUNT} is not accepted; accepted: a 12-digit AWS account ID as "
            "a string (optional; defaults to CDK_DEFAULT_ACCOUNT)",
        ),
        (
            {**DEV, "model_approval": "Rejected"},
            "hfpipe:environments.dev.model_approval: 'Rejected' is not accepted; accepted: the approval status of "
            'each model version a run registers: "PendingManualApproval" or "Approved" (optional; default '
            '"PendingManualApproval"; "Approved" approves every run that passed its smoke test)',
        ),
        (
            {**DEV, "removal_policy": "keep"},
            'hfpipe:environments.dev.removal_policy: \'keep\' is not accepted; accepted: "retain", "destroy"',
        ),
        (
            {**DEV, "log_retention_days": 10},
            "hfpipe:environments.dev.log_retention_days: 10 is not accepted; accepted: one of 1, 3, 5, 7, 14, 30, "
            "60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
        ),
        (
            {**DEV, "checkpoint_expiration_days": True},
            "hfpipe:environments.dev.checkpoint_expiration_days: True is not accepted; accepted: a whole number "
            "of days from 1 to 3650",
        ),
        (
            {**DEV, "retention": 30},
            "hfpipe:environments.dev.retention: unknown key; accepted: account, allowed_image_registries, "
            "allowed_s3_buckets, checkpoint_expiration_days, endpoint_idle_minutes, endpoint_ttl_hours, endpoints, "
            "evaluation_gate, "
            "log_retention_days, model_approval, noncurrent_version_expiration_days, promote_from, quotas, region, "
            "removal_policy, shared_base",
        ),
        (
            {**DEV, "quotas": {"name": "x"}},
            "hfpipe:environments.dev.quotas: {'name': 'x'} is not accepted; accepted: a list of objects with keys "
            "name, value, service_code (optional)",
        ),
        (
            {**DEV, "quotas": [{"name": "ml.g5.2xlarge for training job usage"}]},
            "hfpipe:environments.dev.quotas[0].value: required; accepted: a whole number from 1 to 10000",
        ),
        (
            {**DEV, "quotas": [{"name": "ml.g5.2xlarge for training job usage", "value": 0}]},
            "hfpipe:environments.dev.quotas[0].value: 0 is not accepted; accepted: a whole number from 1 to 10000",
        ),
        (
            {**DEV, "quotas": [{"name": "q", "value": 1, "instance": "ml.g5.2xlarge"}]},
            "hfpipe:environments.dev.quotas[0].instance: unknown key; accepted: name, service_code, value",
        ),
        (
            # Which recipes need a quota is derived from the recipes (the Quota stack's outputs), not written.
            {**DEV, "quotas": [{"name": "q", "value": 1, "used_by": ["tiny-lora"]}]},
            "hfpipe:environments.dev.quotas[0].used_by: unknown key; accepted: name, service_code, value",
        ),
        (
            {**DEV, "quotas": [{"name": "q", "value": 1}, {"name": "q", "value": 2}]},
            "hfpipe:environments.dev.quotas[1].name: 'q' is listed twice; accepted: each quota once, with the "
            "largest value any recipe needs",
        ),
    ],
)
def test_malformed_entries_name_the_key_and_what_is_accepted(entry, message):
    with pytest.raises(ConfigError) as raised:
        parse_environment("dev", entry)
    assert str(raised.value) == message


def test_model_approval_defaults_to_pending_and_may_auto_approve():
    assert parse_environment("dev", DEV).model_approval == "PendingManualApproval"
    assert parse_environment("dev", {**DEV, "model_approval": "Approved"}).model_approval == "Approved"


def test_bad_environment_name_and_missing_context():
    with pytest.raises(ConfigError) as raised:
        load_environments({"Dev_1": DEV})
    assert str(raised.value) == (
        "hfpipe:environments: 'Dev_1' is not accepted; accepted: environment names of a lower-case letter, then "
        "lower-case letters or digits (no '-'), at most 16 characters, not 'hfpipe'"
    )


def test_no_environment_is_called_hfpipe():
    """hfpipe-<env>- starts every other environment's named endpoints and groups: an environment `hfpipe`'s runs
    (hfpipe-<execution>) would share the prefix, and its roles' name-scoped grants with it."""
    with pytest.raises(ConfigError, match="not 'hfpipe'"):
        load_environments({"hfpipe": DEV})


@pytest.mark.parametrize("name", ["dev-", "dev--eu", "dev-eu", "-dev", "Dev", "d" * 17, "1dev", ""])
def test_environment_names_never_share_a_prefix(name):
    """`<env>-` starts every resource name and the training rule's prefix: with a dash in an environment
    name, `dev-eu`'s `run` and `dev`'s `eu-run` would be the same job."""
    with pytest.raises(ConfigError, match="no '-'"):
        load_environments({name: DEV})
    with pytest.raises(ConfigError) as raised:
        load_environments(None)
    assert str(raised.value) == (
        "hfpipe:environments: missing from the cdk.json context; accepted: an object mapping environment names "
        'to settings, e.g. {"dev": {"region": "eu-west-1"}}'
    )


def test_select_environment():
    environments = load_environments({"dev": DEV, "prod": {"region": "us-east-1"}})
    assert [e.name for e in select_environments(environments, None)] == ["dev", "prod"]
    assert [e.name for e in select_environments(environments, "prod")] == ["prod"]
    with pytest.raises(ConfigError) as raised:
        select_environments(environments, "stage")
    assert str(raised.value) == (
        "env: unknown environment 'stage'; accepted: dev, prod (the keys of hfpipe:environments in cdk.json)"
    )


def test_app_stops_on_unknown_environment(repo_root):
    context = {**cdk_app.cdk_json_context(), "env": "stage"}
    with pytest.raises(ConfigError, match=r"^env: unknown environment 'stage'; accepted: dev, prod"):
        cdk_app.build_app(context=context)


def test_app_stops_on_malformed_entry_before_building_stacks():
    context = copy.deepcopy(cdk_app.cdk_json_context())
    del context["hfpipe:environments"]["prod"]["region"]
    with pytest.raises(ConfigError, match=r"^hfpipe:environments\.prod\.region: required"):
        cdk_app.build_app(context=context)


def test_main_prints_one_line_and_fails(monkeypatch, capsys):
    def broken(**kwargs):
        raise ConfigError("env: unknown environment 'stage'; accepted: dev, prod")

    monkeypatch.setattr(cdk_app, "build_app", broken)
    assert cdk_app.main() == 1
    assert (
        capsys.readouterr().err == "hfpipe: cdk.json: env: unknown environment 'stage'; accepted: dev, prod\n"
    )


def test_a_shared_base_the_fit_check_refuses_is_one_line_too(monkeypatch, capsys):
    """The shared base's fit is checked by its construct (RecipeError naming the key), not by ConfigError:
    the same one line, no traceback (a `local up --set shared_base=...` with an unknown base printed nothing
    of it: rich wrote the traceback to stdout)."""
    context = copy.deepcopy(cdk_app.cdk_json_context())
    context["hfpipe:environments"]["dev"]["shared_base"] = {
        "base_model": "my-org/base-8b",
        "instance_type": "ml.g5.4xlarge",
        "max_adapters": 10,
    }
    context["env"] = "dev"
    monkeypatch.setattr(cdk_app, "cdk_json_context", lambda: context)
    assert cdk_app.main() == 1
    assert capsys.readouterr().err.splitlines()[-1] + "\n" == (
        "hfpipe: cdk.json: environments.dev.shared_base.model: the fit check does not know the model "
        "my-org/base-8b; accepted: its figures from its config.json (parameters, layers, kv_heads, head_dim, "
        "lora_width)\n"
    )


@pytest.mark.parametrize("parts", [("Pipeline",), ("Quota", "Pipeline"), ("Data", "Nope")])
def test_build_app_parts_need_data_for_pipeline_and_known_names(parts):
    with pytest.raises(ConfigError) as err:
        cdk_app.build_app(parts=parts)
    assert str(err.value) == (
        f"parts: {sorted(parts)!r}; accepted: a subset of ['Data', 'Quota', 'Pipeline'] with Data for Pipeline"
    )


def test_cdk_json_promotes_prod_from_dev(repo_root):
    context = json.loads((repo_root / "cdk.json").read_text())["context"]
    environments = load_environments(context["hfpipe:environments"])
    assert environments["prod"].promote_from == "dev" and environments["dev"].promote_from is None
    assert environments["prod"].promote_source == PromotionPeer("dev", "eu-west-1", None)
    assert environments["dev"].promoted_to == (PromotionPeer("prod", "us-east-1", None),)
    assert environments["prod"].promoted_to == ()


def test_promotion_peers_know_each_others_region_and_account():
    environments = load_environments(
        {
            "dev": {**DEV, "account": ACCOUNT_A},
            "stage": {"region": "eu-central-1", "account": ACCOUNT_A, "promote_from": "dev"},
            "prod": {"region": "us-east-1", "account": ACCOUNT_B, "promote_from": "stage"},
        }
    )
    dev, stage, prod = environments["dev"], environments["stage"], environments["prod"]
    assert stage.promote_source == PromotionPeer("dev", "eu-west-1", ACCOUNT_A)
    assert dev.promoted_to == (PromotionPeer("stage", "eu-central-1", ACCOUNT_A),)
    assert stage.promoted_to == (PromotionPeer("prod", "us-east-1", ACCOUNT_B),)
    assert not dev.in_other_account(dev.promoted_to[0])  # one account: nothing to share
    assert prod.in_other_account(prod.promote_source) and stage.in_other_account(stage.promoted_to[0])


@pytest.mark.parametrize(
    ("environments", "message"),
    [
        (
            {"dev": DEV, "prod": {"region": "us-east-1", "promote_from": "stage"}},
            "hfpipe:environments.prod.promote_from: 'stage' is not an environment of cdk.json; accepted: "
            'another environment: "dev"',
        ),
        (
            {"dev": {**DEV, "promote_from": "dev"}},
            "hfpipe:environments.dev.promote_from: 'dev' is the environment itself; accepted: another "
            "environment: none",
        ),
        (
            {
                "dev": {**DEV, "promote_from": "prod"},
                "stage": {"region": "eu-central-1", "promote_from": "dev"},
                "prod": {"region": "us-east-1", "promote_from": "stage"},
            },
            "hfpipe:environments.dev.promote_from: 'prod' makes a cycle (dev -> prod -> stage -> dev); accepted: "
            "promotions that end at an environment that promotes from none",
        ),
        (
            {"dev": DEV, "prod": {"region": "us-east-1", "account": ACCOUNT_B, "promote_from": "dev"}},
            "hfpipe:environments.prod.promote_from: 'dev' and 'prod' do not both name an account; accepted: an "
            "account on both environments (cross-account promotion), or on neither (both in the deploying account)",
        ),
        (
            {"dev": DEV, "prod": {"region": "us-east-1", "promote_from": ["dev"]}},
            "hfpipe:environments.prod.promote_from: ['dev'] is not accepted; accepted: the name of another "
            "environment of cdk.json whose approved model versions `hfpipe promote` copies into this one "
            "(optional; no cycles; an account on both environments or on neither)",
        ),
    ],
    ids=["unknown", "itself", "cycle", "one-account", "not-a-name"],
)
def test_promote_from_errors_name_the_key_and_what_is_accepted(environments, message):
    with pytest.raises(ConfigError) as raised:
        load_environments(environments)
    assert str(raised.value) == message
