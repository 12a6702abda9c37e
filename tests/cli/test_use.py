"""Using what was trained, against a moto account: invoke, endpoints (list, cost, delete), logs, keep-endpoint."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from cli_moto import ACCOUNT, REGION, ROLE, Deployed, plan_for, sagemaker_backend, tags_for
from cli_run import run, start_tiny_lora
from moto.backends import get_backend
from sagemaker_resources import serving_resources

from hfpipe import contract
from hfpipe.cli.aws import HfpipeError, stored_plan
from hfpipe.core import cost
from hfpipe.core.run import logs

DIALOGUE = "Amanda: I baked cookies. Do you want some?\nJerry: Sure!\nAmanda: I'll bring you tomorrow :-)\n"


def deploy_endpoint(
    deployed: Deployed,
    plan: dict[str, Any],
    instance_type: str = "ml.g4dn.xlarge",  # moto refuses the newer types
    tags: Any = None,
) -> None:
    """A model, endpoint config and endpoint named and tagged as the pipeline's rules name and tag those of
    execution `plan` (another environment's, or untagged ones): what this environment's pipeline did not
    create."""
    sm = deployed.sagemaker
    tags = tags if tags is not None else tags_for(plan)
    serving_resources(
        sm,
        model=plan["model_name"],
        config=plan["endpoint_config_name"],
        endpoint=plan["endpoint_name"],
        role=ROLE,
        tags=tags,
        instance_type=instance_type,
        PrimaryContainer={
            "Image": "example.invalid/hf-inference:latest",
            "ModelDataUrl": "s3://a/model.tar.gz",
        },
    )


def endpoint_answers(*bodies: Any) -> None:
    """Queue what moto's InvokeEndpoint answers (its documented moto-api hook)."""
    results = [{"Body": json.dumps(b), "ContentType": "application/json"} for b in bodies]
    response = requests.post(
        "http://motoapi.amazonaws.com/moto-api/static/sagemaker/endpoint-results",
        json={"account_id": ACCOUNT, "region": REGION, "results": results},
        timeout=5,
    )
    assert response.status_code == 201


def invoked() -> list[bytes]:
    """The request bodies moto's InvokeEndpoint received, oldest first.

    moto keys each answer by base64(JSON of the request's Accept, Body and x-amzn-sagemaker-* headers),
    filed under the endpoint name it parses from the request (None in this moto version: the name is in
    the URL path), so the bodies of all endpoints are read.
    """
    results = get_backend("sagemaker-runtime")[ACCOUNT][REGION].results
    return [json.loads(base64.b64decode(key))["Body"].encode() for keys in results.values() for key in keys]


@pytest.fixture
def kept(deployed: Deployed) -> dict[str, Any]:
    """A succeeded tiny-lora execution whose endpoint the pipeline kept (its plan)."""
    _, plan = deployed.start("keep-1", keep_endpoint=True)
    assert plan["keep_endpoint"] is True
    assert list(sagemaker_backend().endpoints) == [plan["endpoint_name"]]
    return plan


def other_environments_endpoint(deployed: Deployed) -> dict[str, Any]:
    """The endpoint prod's pipeline keeps for its execution prod-1, in the same account and region."""
    plan = plan_for("prod-1", "prod")
    deploy_endpoint(deployed, plan)
    return plan


# --- invoke ------------------------------------------------------------------------------------------


def test_invoke_by_execution_with_a_dialogue(kept: dict[str, Any], tmp_path: Any, capsys: Any) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(DIALOGUE)
    endpoint_answers([{"generated_text": "...", "summary": "Amanda will bring Jerry cookies tomorrow."}])
    code, out, err = run(
        capsys,
        "invoke",
        "keep-1",
        "--env",
        "dev",
        "--dialogue",
        str(chat),
        "--parameters",
        '{"max_new_tokens": 32}',
    )
    assert (code, err) == (0, "")
    first, second = out.splitlines()
    assert first.startswith(f"answer from {kept['endpoint_name']} in ") and first.endswith(" ms")
    assert second == "summary: Amanda will bring Jerry cookies tomorrow."
    [body] = invoked()
    assert json.loads(body) == {"dialogue": DIALOGUE.strip(), "parameters": {"max_new_tokens": 32}}


def test_invoke_by_endpoint_name_as_json_lines_from_stdin(
    kept: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    lines = [{"inputs": "Amanda: hi\nJerry: hello"}, {"dialogue": "Tom: late again\nAnn: ok"}]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(x) for x in lines) + "\n\n"))
    endpoint_answers([{"generated_text": "a"}], [{"generated_text": "b", "summary": "Tom is late."}])
    code, out, err = run(capsys, "invoke", kept["endpoint_name"], "--env", "dev", "--json")
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["request"] for r in records] == [1, 2]
    assert [r["response"] for r in records] == [
        [{"generated_text": "a"}],
        [{"generated_text": "b", "summary": "Tom is late."}],
    ]
    assert all(r["endpoint"] == kept["endpoint_name"] and r["latency_ms"] >= 0 for r in records)
    assert [json.loads(b) for b in invoked()] == lines


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--data", '{"dialogue": "A: hi", "parameters": {"temprature": 0.7}}'],
            "--data is not a request the endpoint accepts: parameters.temprature is not supported; accepted: "
            "['do_sample', 'max_new_tokens', 'no_repeat_ngram_size', 'num_beams', 'repetition_penalty', "
            "'temperature', 'top_k', 'top_p'] (checked with training_code/inference_clm.py; nothing was sent)",
        ),
        (
            ["--data", '{"text": "hi"}'],
            '--data is not a request the endpoint accepts: the request needs "inputs" (a prompt) or '
            "\"dialogue\"; got keys ['text'] (checked with training_code/inference_clm.py; nothing was sent)",
        ),
        (
            ["--data", "{nope"],
            "--data is not JSON (Expecting property name enclosed in double quotes): '{nope'",
        ),
        (
            ["--data", "{}", "--dialogue", "x.txt"],
            "--data does not go with --dialogue: give the requests one way: --data, --file or --dialogue",
        ),
    ],
)
def test_invoke_checks_the_request_with_the_handler_before_sending(
    kept: dict[str, Any], capsys: Any, argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "invoke", "keep-1", "--env", "dev", *argv)
    assert (code, out) == (2 if "does not go with" in message else 1, "")  # two sources: a usage error
    assert err == f"error: {message}\n"
    assert invoked() == []


def test_invoke_file_with_a_bad_line(kept: dict[str, Any], tmp_path: Any, capsys: Any) -> None:
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"inputs": "a"}\n{"inputs": ""}\n')
    code, _, err = run(capsys, "invoke", "keep-1", "--env", "dev", "--file", str(batch))
    assert code == 1
    assert err == (
        f"error: --file {batch} line 2 is not a request the endpoint accepts: request field 'inputs': '' is "
        "not accepted; accepted: a non-empty string of at most 20000 characters (checked with "
        "training_code/inference_clm.py; nothing was sent)\n"
    )
    assert invoked() == []  # not even the good first line


def test_the_handler_loads_with_its_sibling_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler imports request_checks from its own folder; the command finds it without the suite's
    sys.path (tests/conftest.py puts training_code/ there, a shell running `hfpipe invoke` does not)."""
    from hfpipe import kinds
    from hfpipe.cli.deploy import invoke

    training_code = str(kinds.training_code_file("request_checks.py").parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p.rstrip("/") != training_code])
    monkeypatch.delitem(sys.modules, "request_checks", raising=False)
    invoke.handler_module.cache_clear()
    try:
        with pytest.raises(HfpipeError, match=r"request field 'inputs': '' is not accepted"):
            invoke.check_requests([{"inputs": ""}], "inference_clm", ["--data"])
    finally:
        invoke.handler_module.cache_clear()


def test_invoke_an_execution_whose_endpoint_was_deleted(deployed: Deployed, capsys: Any) -> None:
    _, plan = deployed.start("gone-1")
    code, _, err = run(capsys, "invoke", "gone-1", "--env", "dev", "--data", '{"inputs": "x"}')
    assert code == 1
    assert err == (
        f"error: endpoint {plan['endpoint_name']} of execution 'gone-1' does not exist (SUCCEEDED): the "
        "pipeline deletes it after the smoke test unless it is kept; start with `hfpipe start ... "
        "--keep-endpoint`\n"
    )


def test_invoke_refuses_another_environments_endpoint(deployed: Deployed, capsys: Any) -> None:
    prod = other_environments_endpoint(deployed)
    name = prod["endpoint_name"]
    code, _, err = run(capsys, "invoke", name, "--env", "dev", "--data", '{"inputs": "x"}')
    assert code == 1
    assert err == f"error: endpoint {name} belongs to environment 'prod' (tag hfpipe:env), not 'dev'\n"
    assert invoked() == []


def test_invoke_dialogue_on_a_qa_endpoint(deployed: Deployed, tmp_path: Any, capsys: Any) -> None:
    _, plan = deployed.start("qa-1", recipe="tiny-qa", keep_endpoint=True)
    chat = tmp_path / "chat.txt"
    chat.write_text(DIALOGUE)
    code, _, err = run(capsys, "invoke", "qa-1", "--env", "dev", "--dialogue", str(chat))
    assert code == 1
    assert err == (
        f"error: --dialogue is for the summarization recipes; {plan['endpoint_name']} serves "
        "question-answering (handler inference_qa.py): send its request shape with --data or --file\n"
    )
    code, _, err = run(
        capsys, "invoke", "qa-1", "--env", "dev", "--data", '{"question": "Who?", "context": ""}'
    )
    assert code == 1
    assert "request field 'context' must be a non-empty string; got ''" in err


def test_invoke_needs_a_target(capsys: Any) -> None:
    code, _, err = run(capsys, "invoke", "--data", "{}")
    assert code == 2  # a usage error (docs/cli.md)
    assert err == "error: hfpipe invoke needs an EXECUTION or ENDPOINT name (with --env), or --local\n"


# --- endpoints ---------------------------------------------------------------------------------------


def test_endpoints_lists_this_environments_with_cost(
    deployed: Deployed, kept: dict[str, Any], capsys: Any
) -> None:
    prod = other_environments_endpoint(deployed)
    untagged = {
        **kept,
        "model_name": "mine-model",
        "endpoint_config_name": "mine-config",
        "endpoint_name": "mine",
    }
    deploy_endpoint(deployed, untagged, tags=[])
    code, out, err = run(capsys, "endpoints", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    [record] = json.loads(out)
    assert record["name"] == kept["endpoint_name"]
    assert record["execution"] == "keep-1" and record["recipe"] == "tiny-lora"
    # tiny-lora serves on one ml.m5.large (its recipe), at 0.115 USD/h (the price table)
    serving = (kept["serving_instance_type"], kept["serving_instance_count"])
    assert (record["instance_type"], record["instance_count"]) == serving == ("ml.m5.large", 1)
    assert record["price_per_hour_usd"] == 0.115
    created = datetime.fromisoformat(record["created"])
    assert 0 <= record["cost_so_far_usd"] <= cost.endpoint_cost_so_far(*serving, created, datetime.now(UTC))

    code, out, _ = run(capsys, "endpoints", "--env", "dev")
    assert code == 0
    assert kept["endpoint_name"] in out and "0.115" in out
    assert prod["endpoint_name"] not in out and "mine" not in out
    assert "1 endpoint up: 0.115 USD/h together" in out


def test_endpoint_cost_rule() -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    assert cost.endpoint_price_per_hour("ml.g5.4xlarge", 2) == pytest.approx(4.06)
    assert cost.endpoint_cost_so_far(
        "ml.g5.4xlarge", 1, start, start + timedelta(minutes=90)
    ) == pytest.approx(3.045)
    assert cost.endpoint_cost_so_far("ml.unknown.xlarge", 1, start, start + timedelta(hours=1)) is None


def test_endpoints_delete(deployed: Deployed, kept: dict[str, Any], capsys: Any) -> None:
    name = kept["endpoint_name"]
    code, out, err = run(capsys, "endpoints", "delete", name, "--env", "dev")
    assert (code, err) == (
        1,
        "error: not deleting without confirmation: stdin is not a terminal; pass --yes to confirm\n",
    )
    code, out, err = run(capsys, "endpoints", "delete", name, "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert f"deleted endpoint {name} (0.115 USD/h, " in out
    assert f"deleted endpoint config {kept['endpoint_config_name']}" in out
    assert f"deleted model {kept['model_name']}" in out
    backend = sagemaker_backend()
    assert not backend.endpoints and not backend.endpoint_configs and not backend._models
    assert run(capsys, "endpoints", "--env", "dev") == (0, "no endpoints up in environment 'dev'\n", "")


def test_stop_after_a_keep_endpoint_run_leaves_the_kept_endpoint(
    deployed: Deployed, kept: dict[str, Any], capsys: Any
) -> None:
    """`hfpipe stop` works on ended executions too (it finishes an interrupted stop), but a run that succeeded
    with keep_endpoint: true kept its endpoint by the user's decision: only `endpoints delete` undoes it."""
    name = kept["endpoint_name"]
    code, out, err = run(capsys, "stop", "keep-1", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "execution keep-1 already ended (SUCCEEDED)",
        f"training job {kept['training_job_name']} already Completed",
        "evaluation job dev-keep-1-eval already Completed, 0.0000 USD",  # the stand-in job took no time
        f"its endpoint {name} was kept (keep_endpoint: true) and stays; "
        f"`hfpipe endpoints delete {name} --env dev` deletes it",
    ]
    assert list(sagemaker_backend().endpoints) == [name]
    assert {kept["model_name"]} == set(sagemaker_backend()._models)


def test_a_kept_endpoint_is_tagged_by_the_pipeline_and_survives_an_abnormal_end(
    deployed: Deployed, kept: dict[str, Any]
) -> None:
    """keep_endpoint: true is the user's decision: after the smoke test the pipeline tags the endpoint
    hfpipe:keep=true, so an abnormal end later (a failed Report, a timeout) leaves it, as `stop` does."""
    from pipeline_lambdas import execution_end

    name = kept["endpoint_name"]
    endpoint = deployed.sagemaker.describe_endpoint(EndpointName=name)
    tags = {
        t["Key"]: t["Value"]
        for t in deployed.sagemaker.list_tags(ResourceArn=endpoint["EndpointArn"])["Tags"]
    }
    assert tags[contract.TAG_KEEP] == "true"
    event = {
        "source": "aws.states",
        "detail-type": "Step Functions Execution Status Change",
        "detail": {"status": "TIMED_OUT", "name": "keep-1", "stateMachineArn": deployed.state_machine_arn},
    }
    report = execution_end.on_execution_end(
        event, deployed.sagemaker, None, None, "dev", deployed.state_machine_arn
    )
    assert report["endpoint_deleted"] is False
    assert list(sagemaker_backend().endpoints) == [name]


def test_endpoints_delete_refuses_another_environments(deployed: Deployed, capsys: Any) -> None:
    name = other_environments_endpoint(deployed)["endpoint_name"]
    code, out, err = run(capsys, "endpoints", "delete", name, "--env", "dev", "--yes")
    assert (code, out) == (1, "")
    assert err == (
        f"error: endpoint {name} belongs to environment 'prod' (tags hfpipe:env, hfpipe:managed-by), "
        "not 'dev': nothing deleted\n"
    )
    assert name in sagemaker_backend().endpoints
    # Nothing of that name in the environment: nothing to delete, said as such (a finished delete run again
    # cannot be told from a name never made, and its rerun must not fail).
    code, out, err = run(capsys, "endpoints", "delete", "nope", "--env", "dev", "--yes")
    assert (code, err) == (0, "")
    assert f"endpoint nope: nothing of it is left in {REGION}" in " ".join(out.split())
    assert "deleted already, or never made here (`hfpipe endpoints --env dev` lists them)" in " ".join(
        out.split()
    )


# --- list / report / start ----------------------------------------------------------------------------


def test_list_shows_the_endpoints_up(deployed: Deployed, kept: dict[str, Any], capsys: Any) -> None:
    deployed.start("gone-1")
    code, out, err = run(capsys, "list", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    records = {r["name"]: r for r in json.loads(out)}
    assert records["gone-1"]["endpoint"] is None
    assert records["keep-1"]["endpoint"]["name"] == kept["endpoint_name"]
    assert records["keep-1"]["endpoint"]["price_per_hour_usd"] == 0.115
    code, out, _ = run(capsys, "list", "--env", "dev")
    assert code == 0
    [row] = [line for line in out.splitlines() if "keep-1 " in line]
    assert f"{kept['endpoint_name']} (InService, 0.115 USD/h, " in row and " so far)" in row


def test_report_shows_the_endpoint_up_and_its_cost(
    deployed: Deployed, kept: dict[str, Any], capsys: Any
) -> None:
    code, out, err = run(capsys, "report", "keep-1", "--env", "dev", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["endpoint_deleted"] is False
    assert report["endpoint_status"] == "InService"
    assert report["endpoint_price_per_hour_usd"] == 0.115
    code, out, _ = run(capsys, "report", "keep-1", "--env", "dev")
    assert f"{kept['endpoint_name']} (up: InService, 0.115 USD/h, " in out
    assert f"`hfpipe endpoints delete {kept['endpoint_name']} --env dev`" in out


def test_start_keep_endpoint(deployed: Deployed, capsys: Any) -> None:
    code, out, err = start_tiny_lora(
        capsys,
        "--name",
        "k-1",
        "--keep-endpoint",
        "--ttl",
        "90M",
    )
    assert (code, err) == (0, "")
    assert "the endpoint stays up after the smoke test (billed per hour)" in out
    # ... and says until when: its expiry (--ttl 90m from the Plan), then the reaper's idle window.
    said = " ".join(out.split())
    assert re.search(
        r"\(billed per hour\) until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, then until the environment's reaper",
        said,
    )
    # the execution of the environment's state machine (its ARN from SSM), named as asked
    arn = deployed.state_machine_arn.replace(":stateMachine:", ":execution:") + ":k-1"
    sent = json.loads(deployed.sfn.describe_execution(executionArn=arn)["input"])
    assert sent["keep_endpoint"] is True
    assert sent["ttl"] == "90m"  # --ttl, as the Plan reads it (docs/deploy.md, "Time to live")
    # the Plan Lambda turns the input field into serving.keep_endpoint, and the pipeline keeps the endpoint
    # it names in its plan
    assert deployed.wait(arn) == "SUCCEEDED"
    plan = stored_plan(deployed.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"])
    assert plan is not None and plan.keep_endpoint is True
    assert list(sagemaker_backend().endpoints) == [plan.endpoint_name]
    (expires,) = [t["Value"] for t in plan.hosting_tags if t["Key"] == contract.TAG_EXPIRES_AT]
    endpoint_arn = deployed.sagemaker.describe_endpoint(EndpointName=plan.endpoint_name)["EndpointArn"]
    tagged = deployed.sagemaker.list_tags(ResourceArn=endpoint_arn)["Tags"]
    assert {"Key": contract.TAG_EXPIRES_AT, "Value": expires} in tagged

    code, _, err = start_tiny_lora(capsys, "--set", "deploy=false", "--keep-endpoint")
    assert (code, err) == (
        1,
        "error: --keep-endpoint: recipe 'tiny-lora' sets deploy: false, so it creates no endpoint to keep\n",
    )


# --- logs --------------------------------------------------------------------------------------------


def write_log(
    deployed: Deployed, job: str, host: str, lines: list[tuple[int, str]], epoch: int = 1764547200
) -> None:
    client = deployed.logs
    with contextlib.suppress(client.exceptions.ResourceAlreadyExistsException):
        client.create_log_group(logGroupName=logs.LOG_GROUP)
    stream = logs.stream_name(job, host, epoch)
    with contextlib.suppress(client.exceptions.ResourceAlreadyExistsException):
        client.create_log_stream(logGroupName=logs.LOG_GROUP, logStreamName=stream)
    client.put_log_events(
        logGroupName=logs.LOG_GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": t, "message": m} for t, m in lines],
    )


def now_ms(offset_s: float = 0) -> int:
    return int((datetime.now(UTC).timestamp() + offset_s) * 1000)


@pytest.fixture
def two_instance_job(deployed: Deployed) -> dict[str, Any]:
    _, plan = deployed.start("ddp-1")  # the job its Launch created, Completed
    t = now_ms(-3600)
    write_log(
        deployed, plan["training_job_name"], "algo-1", [(t, "algo-1 starts"), (t + 2000, "{'loss': 2.5}")]
    )
    write_log(
        deployed,
        plan["training_job_name"],
        "algo-2",
        [(t + 1000, "algo-2 starts"), (t + 3000, "[rank1] done")],
    )
    # another job whose name starts the same: not this job's (the prefix ends with '/')
    write_log(deployed, plan["training_job_name"] + "x", "algo-1", [(t + 1500, "other job")])
    return plan


def test_logs_every_instance_interleaved(
    deployed: Deployed, two_instance_job: dict[str, Any], capsys: Any
) -> None:
    code, out, err = run(capsys, "logs", "ddp-1", "--env", "dev")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "[algo-1] algo-1 starts",
        "[algo-2] algo-2 starts",
        "[algo-1] {'loss': 2.5}",
        "[algo-2] [rank1] done",
    ]
    code, out, _ = run(capsys, "logs", "ddp-1", "--env", "dev", "--json")
    first = json.loads(out.splitlines()[0])
    assert first["host"] == "algo-1" and first["message"] == "algo-1 starts"
    assert datetime.fromisoformat(first["timestamp"]) < datetime.now(UTC)


def test_logs_since(deployed: Deployed, two_instance_job: dict[str, Any], capsys: Any) -> None:
    write_log(deployed, two_instance_job["training_job_name"], "algo-1", [(now_ms(-60), "recent line")])
    code, out, err = run(capsys, "logs", "ddp-1", "--env", "dev", "--since", "10m")
    assert (code, out, err) == (0, "[algo-1] recent line\n", "")
    code, _, err = run(capsys, "logs", "ddp-1", "--env", "dev", "--since", "ten")
    assert (code, err) == (
        2,
        "error: --since 'ten' is not a duration: use a positive number followed by s, m, h, d or w (e.g. 12h, 7d)\n",
    )


def test_logs_follow_until_the_job_ends(deployed: Deployed, two_instance_job: dict[str, Any]) -> None:
    from hfpipe.cli import aws
    from hfpipe.cli.run.logs import follow_cloudwatch

    name = two_instance_job["training_job_name"]
    job = deployed.job(name)
    job.training_job_status = "InProgress"
    seen: list[str] = []
    polls = 0

    def sleep(_: float) -> None:
        nonlocal polls
        polls += 1
        if polls == 1:  # new lines arrive between polls, one with the timestamp already seen
            write_log(deployed, name, "algo-1", [(now_ms(), "{'loss': 1.9}")])
        if polls == 2:
            write_log(deployed, name, "algo-2", [(now_ms(), "Training complete")])
            job.training_job_status = "Failed"

    status = follow_cloudwatch(
        aws.make_clients(region=REGION),
        name,
        start_ms=None,
        follow=True,
        interval=0.01,
        emit=lambda line: seen.append(line.message),
        sleep=sleep,
    )
    assert status == "Failed"
    assert seen == [
        "algo-1 starts",
        "algo-2 starts",
        "{'loss': 2.5}",
        "[rank1] done",
        "{'loss': 1.9}",
        "Training complete",
    ]


def test_logs_before_the_job_logged(deployed: Deployed, capsys: Any) -> None:
    _, plan = deployed.start("quiet-1")
    job = plan["training_job_name"]
    code, out, err = run(capsys, "logs", "quiet-1", "--env", "dev")
    assert (code, out) == (0, "")
    assert err == f"training job {job} has no log lines yet (/aws/sagemaker/TrainingJobs, streams {job}/*)\n"


def test_log_tail_over_instances(deployed: Deployed, two_instance_job: dict[str, Any]) -> None:
    tail = logs.log_tail(deployed.logs, two_instance_job["training_job_name"], lines=3)
    assert logs.format_lines(tail) == [
        "[algo-2] algo-2 starts",
        "[algo-1] {'loss': 2.5}",
        "[algo-2] [rank1] done",
    ]
    assert logs.log_tail(deployed.logs, "never-ran", lines=3) == []
    assert logs.host_of("job/algo-12-1764547200") == "algo-12"


def test_report_of_a_failed_job_carries_its_log_tail(deployed: Deployed, capsys: Any) -> None:
    _, plan = deployed.start("oom-1", fail=True)  # the job fails; the execution with it
    assert deployed.job(plan["training_job_name"]).training_job_status == "Failed"
    lines = [(now_ms(-100 + i), f"step {i}") for i in range(30)] + [
        (now_ms(-50), "torch.OutOfMemoryError: CUDA")
    ]
    write_log(deployed, plan["training_job_name"], "algo-1", lines)
    code, out, _ = run(capsys, "report", "oom-1", "--env", "dev", "--json")
    assert code == 0
    report = json.loads(out)
    assert len(report["log_tail"]) == logs.TAIL_LINES
    assert report["log_tail"][-1] == "torch.OutOfMemoryError: CUDA"
    code, out, _ = run(capsys, "report", "oom-1", "--env", "dev")
    assert "last lines of the training log" in out and "torch.OutOfMemoryError: CUDA" in out


def test_report_lambda_adds_the_log_tail_of_a_failed_job(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    report_lambda = importlib.import_module("pipeline_lambdas.report")
    t = now_ms(-60)
    write_log(deployed, "oom-2-train", "algo-1", [(t + i, f"step {i}") for i in range(25)])
    write_log(deployed, "oom-2-train", "algo-2", [(t + 30, "Traceback (most recent call last):")])
    write_log(deployed, "oom-2-train", "algo-2", [(t + 31, "torch.OutOfMemoryError: CUDA out of memory")])
    report = {
        "training_job_name": "oom-2-train",
        "training_job_status": "Failed",
        "cause": "training job oom-2-train Failed: AlgorithmError: ExecuteUserScriptError",
    }
    report_lambda.add_log_tail(deployed.logs, report)
    assert len(report["log_tail"]) == logs.TAIL_LINES
    assert report["log_tail"][-2:] == [
        "[algo-2] Traceback (most recent call last):",
        "[algo-2] torch.OutOfMemoryError: CUDA out of memory",
    ]
    assert report["cause"].startswith(
        "training job oom-2-train Failed: AlgorithmError: ExecuteUserScriptError\n"
        "last lines of the training log:\n[algo-1] step 7\n"
    )
    assert report["cause"].endswith("[algo-2] torch.OutOfMemoryError: CUDA out of memory")

    completed = {"training_job_name": "oom-2-train", "training_job_status": "Completed", "cause": None}
    report_lambda.add_log_tail(deployed.logs, completed)
    assert "log_tail" not in completed
    unreadable = {"training_job_name": "x", "training_job_status": "Failed", "cause": "c"}
    report_lambda.add_log_tail(None, unreadable)  # no client at all: the report still goes out as it was
    assert unreadable == {"training_job_name": "x", "training_job_status": "Failed", "cause": "c"}


def test_watch_shows_the_last_lines_of_the_log(
    deployed: Deployed, two_instance_job: dict[str, Any], capsys: Any
) -> None:
    code, out, err = run(capsys, "watch", "ddp-1", "--env", "dev")
    assert (code, err) == (0, "")
    assert "training log (last lines)" in out
    view = out.split("training log (last lines)", 1)[1]
    assert view.index("[algo-1] algo-1 starts") < view.index("[algo-2] [rank1] done")  # oldest first


def test_invoke_an_endpoint_still_creating(deployed: Deployed, kept: dict[str, Any], capsys: Any) -> None:
    name = kept["endpoint_name"]
    sagemaker_backend().endpoints[name].endpoint_status = "Creating"
    code, _, err = run(capsys, "invoke", "keep-1", "--env", "dev", "--data", '{"inputs": "x"}')
    assert (code, err) == (
        1,
        f"error: endpoint {name} is Creating, not InService: wait for it (`hfpipe endpoints --env dev`)\n",
    )
    assert invoked() == []


def test_logs_local(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    import os

    old, new = tmp_path / "tiny-lora-20261201-000000", tmp_path / "tiny-lora-20261201-010000"
    for run_dir, text in ((old, "old run\n"), (new, "step 1\n[rank0] step 2\n")):
        run_dir.mkdir()
        (run_dir / "training.log").write_text(text)
    os.utime(old / "training.log", (1, 1))
    # the newest run by default, a named one on request
    assert run(capsys, "logs", "--local", "--out", str(tmp_path)) == (0, "step 1\n[rank0] step 2\n", "")
    assert run(capsys, "logs", old.name, "--local", "--out", str(tmp_path)) == (0, "old run\n", "")
    code, out, _ = run(capsys, "logs", "--local", "--out", str(tmp_path), "--json")
    assert [json.loads(line)["message"] for line in out.splitlines()] == ["step 1", "[rank0] step 2"]

    # --follow ends once the run has written its report (and says when the job did not complete)
    (new / "report.json").write_text(json.dumps({"training_job_status": "Failed"}))
    code, out, err = run(capsys, "logs", "--local", "--out", str(tmp_path), "--follow", "--interval", "0.01")
    assert (code, out) == (1, "step 1\n[rank0] step 2\n")
    assert err == f"training job of {new.name} ended Failed\n"

    code, _, err = run(capsys, "logs", "nope", "--local", "--out", str(tmp_path))
    assert code == 1
    assert err == (f"error: no local run 'nope'; local runs in {tmp_path}: {old.name}, {new.name}\n")
    code, _, err = run(capsys, "logs", "--local", "--out", str(tmp_path), "--since", "1h")
    assert (code, err) == (
        2,
        "error: --since needs CloudWatch's timestamps; a local run's training.log has none (drop --since)\n",
    )


def test_report_lambda_prices_a_kept_endpoint(deployed: Deployed) -> None:
    """The Report Lambda's report (the execution's output) prices the endpoint the pipeline kept."""
    arn, plan = deployed.start(
        "keep-9", recipe="bloomz-7b1-lora-samsum", keep_endpoint=True, overrides={"serving.instance_count": 2}
    )
    kept = json.loads(deployed.sfn.describe_execution(executionArn=arn)["output"])["report"]
    assert (plan["serving_instance_type"], plan["serving_instance_count"]) == ("ml.g5.4xlarge", 2)
    assert kept["endpoint_deleted"] is False
    assert kept["endpoint_price_per_hour_usd"] == pytest.approx(2 * 2.03)  # 2 x ml.g5.4xlarge
    arn, _ = deployed.start(
        "gone-9", recipe="bloomz-7b1-lora-samsum", overrides={"serving.instance_count": 2}
    )
    deleted = json.loads(deployed.sfn.describe_execution(executionArn=arn)["output"])["report"]
    assert deleted["endpoint_deleted"] is True
    assert "endpoint_price_per_hour_usd" not in deleted


def test_invoke_reports_the_containers_error(aws_credentials: None) -> None:
    """InvokeEndpoint's ModelError (HTTP 424; the container answered 4xx/5xx) becomes a one-line error with
    the container's message. Stubbed: moto's InvokeEndpoint always answers."""
    import boto3
    from botocore.stub import Stubber

    from hfpipe.cli import aws
    from hfpipe.cli.deploy.invoke import Target, send

    clients = aws.Clients(boto3.Session(region_name=REGION))
    message = (
        'Received client error (400) from primary with message "parameters.seed is not supported". See '
        f"https://{REGION}.console.aws.amazon.com/cloudwatch/home?region={REGION}#logEventViewer:group="
        f"/aws/sagemaker/Endpoints/keep-1-ep in account {ACCOUNT} for more information."
    )
    with Stubber(clients.runtime) as stub:
        stub.add_client_error(
            "invoke_endpoint", service_error_code="ModelError", service_message=message, http_status_code=424
        )
        with pytest.raises(aws.HfpipeError) as caught:
            send(clients, Target(name="keep-1-ep", task=None), {"inputs": "x"})
    assert str(caught.value) == f"endpoint keep-1-ep refused the request: {message}"


def test_list_when_endpoints_cannot_be_read(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from hfpipe.cli.deploy import endpoints

    def denied(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("AccessDenied on sagemaker:ListTags")

    monkeypatch.setattr(endpoints, "find_endpoints", denied)
    deployed.start("run-1")
    code, out, err = run(capsys, "list", "--env", "dev")
    assert code == 0 and "run-1" in out
    assert err == (
        "warning: listing endpoints failed: AccessDenied on sagemaker:ListTags; the endpoint column is empty\n"
    )
