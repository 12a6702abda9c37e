"""What a newcomer typed, refused as the docs say (docs/cli.md: a usage error exits 2 before any AWS call or
anything long; any other refusal is one line, exit 1), never a traceback, never an option silently ignored."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_run import run

from hfpipe.cli import build_parser, terminal
from hfpipe.cli.clients import HfpipeError
from hfpipe.cli.run import loss_curves


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["local", "--recipe", "tiny-lora", "--json"], "--json is an option of --dry-run"),
        (["local", "--recipe", "tiny-lora", "--port", "9000"], "--port is an option of --serve"),
        (["local", "--recipe", "tiny-lora", "--serve", "--port", "99999"], "--port 99999 is not accepted"),
        (["local", "--recipe", "tiny-lora", "--set", "foo"], "--set 'foo' is not KEY=VALUE"),
        (["local", "--recipe", "tiny-lora", "--channel", "bogus"], "--channel 'bogus' is not NAME=FOLDER"),
        (["report", "--local", "--env", "dev"], "--env does not go with --local"),
        (["logs", "--local", "--env", "dev"], "--env does not go with --local"),
        (["report", "--local", "--profile", "p"], "--profile does not go with --local"),
        (["invoke", "--local", "--env", "dev", "--data", "{}"], "--env does not go with --local"),
        (["invoke", "x", "--env", "dev", "--port", "8081"], "--port is an option of --local"),
        (["invoke", "x", "--env", "dev", "--data", "{}", "--file", "f"], "--data does not go with --file"),
        (["report", "x", "--env", "dev", "--out", "runs"], "--out is an option of --local"),
        (["logs", "x", "--env", "dev", "--interval", "7"], "--interval is an option of --follow"),
        (["start", "--env", "dev", "--recipe", "tiny-lora", "--json"], "--json is an option of --dry-run"),
        (
            ["start", "--env", "dev", "--recipe", "tiny-lora", "--interval", "5"],
            "--interval is an option of --watch",
        ),
        (
            ["start", "--env", "dev", "--recipe", "tiny-lora", "--dry-run", "--watch"],
            "--dry-run does not go with",
        ),
        (["promote", "tiny-lora/1", "--env", "prod", "--json"], "--json is an option of --watch"),
        (["cleanup", "--env", "dev", "--dry-run", "--yes"], "--yes does not go with --dry-run"),
        (
            ["deploy", "--env", "dev", "--model", "a/1", "--endpoint", "e", "--no-wait", "--interval", "5"],
            "--interval does not go with --no-wait",
        ),
        (
            ["local", "--recipe", "tiny-lora", "--channel", "training=.", "--channel", "training=."],
            "given twice",
        ),
        (["cleanup", "--env", "dev", "--older-than", "5x"], "--older-than '5x' is not a duration"),
        (["models", "approve", "--env", "dev"], "the following arguments are required: VERSION"),
        (["models", "download", "--env", "dev"], "the following arguments are required: VERSION"),
        (["models", "compare", "a/1", "--env", "dev"], "the following arguments are required: VERSION"),
        (["invoke", "--local", "--port", "0"], "--port 0 is not accepted"),
    ],
)
def test_usage_errors_exit_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")  # no AWS call could succeed anyway
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "HFPIPE_LOCAL"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run(capsys, *argv)
    assert code == 2, (code, err)
    assert message in err and "Traceback" not in err, err
    # Refused before the stacks are synthesized (no stage line) and before any AWS call (no credentials hint).
    assert "synthesizing" not in err and "credentials" not in err, err


def test_an_empty_channel_folder_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = run(
        capsys,
        "local",
        "--recipe",
        "tiny-lora",
        "--channel",
        f"training={tmp_path / 'empty'}",
        "--out",
        str(tmp_path / "runs"),
    )
    assert code == 2 and "holds no file" in err and err.count("\n") == 1, err


def test_an_out_folder_that_cannot_be_made_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    code, _, err = run(capsys, "local", "--recipe", "tiny-lora", "--out", str(tmp_path / "a-file" / "sub"))
    assert code == 1 and err.count("\n") == 1, err
    assert "cannot create the output folder" in err and "Not a directory" in err, err


def test_reading_runs_from_an_out_that_does_not_exist_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (["report", "--local"], ["local", "prune"], ["logs", "--local"]):
        code, _, err = run(capsys, *argv, "--out", str(tmp_path / "nowhere"))
        assert code == 1 and "no such folder" in err, (argv, err)


def test_a_plot_that_cannot_be_written_is_one_line_naming_plot(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfpipe.cli.run import report

    def refuses(*args: Any, **kwargs: Any) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(report, "plot_losses", refuses)
    curves = SimpleNamespace(series={"loss": [(1, 1.0)]}, xlabel="step", describe=lambda: "1 point")
    with pytest.raises(
        HfpipeError, match=r"^--plot '/ro/x.png': cannot write the file \(Permission denied\)"
    ):
        loss_curves.plot(curves, Path("/ro/x.png"), title="run")  # type: ignore[arg-type]


def test_with_json_the_commands_other_lines_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    out = terminal.console()
    terminal.said(argparse.Namespace(json=True), out, "loss plot: x.png")
    terminal.said(argparse.Namespace(json=False), out, "loss plot: y.png")
    captured = capsys.readouterr()
    assert captured.err == "loss plot: x.png\n" and captured.out == "loss plot: y.png\n"


def _parsers(
    parser: argparse.ArgumentParser, path: str = "hfpipe"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _parsers(sub, f"{path} {name}")
    return found


def test_every_commands_help_opens_with_what_it_does() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 30
    missing = [path for path, p in parsers[1:] if not (p.description or "").strip()]
    assert missing == []
    approve = dict(parsers)["hfpipe models approve"].format_usage()
    assert "VERSION" in approve and "[VERSION" not in approve  # required, and shown so
    assert "[ACTION ...]" in dict(parsers)["hfpipe local"].format_usage()  # optional: --recipe runs it


def test_the_local_port_is_the_servers() -> None:
    from hfpipe.cli.parser import LOCAL_PORT
    from hfpipe.local.serving.serve import DEFAULT_PORT

    assert LOCAL_PORT == DEFAULT_PORT


def test_an_environment_cdk_json_does_not_name_gets_the_ones_it_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from hfpipe.cli import local_world

    monkeypatch.setenv("HFPIPE_LOCAL_HOME", "/nonexistent-world")
    with pytest.raises(HfpipeError) as refused:
        local_world.clients_for(argparse.Namespace(env="staging", region=None))
    assert "--env 'staging': not an environment of cdk.json; accepted: dev, prod" in str(refused.value)
    with pytest.raises(HfpipeError, match="start it with hfpipe local up --env dev"):
        local_world.clients_for(argparse.Namespace(env="dev", region=None))


def test_a_process_waiting_for_anothers_synthesis_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfpipe.local import stacks

    release = threading.Event()
    first_synthesizes = threading.Event()

    def slow_synth(*args: Any) -> dict[str, Any]:
        first_synthesizes.set()
        assert release.wait(60)
        return {"Data": {}}

    monkeypatch.setattr(stacks, "_synth", slow_synth)
    monkeypatch.delenv(stacks.CACHE_ENV, raising=False)  # the suite's shared synthesis cache has the entry
    said: list[str] = []
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(stacks.synth_stacks(tmp_path)))
    first.start()
    assert first_synthesizes.wait(60)
    second = threading.Thread(target=lambda: results.append(stacks.synth_stacks(tmp_path, say=said.append)))
    second.start()
    try:
        for _ in range(600):
            if said:
                break
            threading.Event().wait(0.05)
        assert said and said[0].startswith("waiting for another hfpipe process to synthesize the stacks")
    finally:
        release.set()
        first.join(60)
        second.join(60)
    assert results == [{"Data": {}}, {"Data": {}}]


def test_an_actions_options_are_not_held_to_its_commands_rules() -> None:
    """`local --port` is an option of `--serve`; `local up --port` is local up's own."""
    from hfpipe.cli.parser import check_rules

    args, _ = build_parser().parse_known_args(["local", "up", "--env", "dev", "--port", "5"])
    check_rules(args)  # no usage error
    args, _ = build_parser().parse_known_args(["local", "--recipe", "tiny-lora", "--port", "5"])
    with pytest.raises(HfpipeError, match="--port is an option of --serve"):
        check_rules(args)


def test_what_the_file_system_refuses_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hfpipe.cli import faults

    def unreadable(_args: Any) -> int:
        raise PermissionError(13, "Permission denied", "/srv/data/train.jsonl")

    assert faults.run(unreadable, argparse.Namespace()) == 1
    assert capsys.readouterr().err == "error: '/srv/data/train.jsonl': Permission denied\n"


def test_invoke_finds_a_named_endpoint_by_its_cdk_json_name() -> None:
    """`hfpipe invoke classifier --env prod` once answered "unknown execution 'classifier'" while `hfpipe
    endpoints delete classifier` took the name: both resolve NAME the same way (named_endpoints.resolve_name)."""
    import botocore.exceptions

    from hfpipe.cli.deploy import invoke

    class SageMaker:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
            self.asked.append(EndpointName)
            if EndpointName != "hfpipe-prod-classifier":
                error = {
                    "Error": {
                        "Code": "ValidationException",
                        "Message": f"Could not find endpoint {EndpointName}",
                    }
                }
                raise botocore.exceptions.ClientError(error, "DescribeEndpoint")  # type: ignore[arg-type]
            return {"EndpointName": EndpointName}

    clients = SimpleNamespace(sagemaker=SageMaker())
    found = invoke._endpoint_named(clients, "classifier", "prod")  # type: ignore[arg-type]
    assert found == {"EndpointName": "hfpipe-prod-classifier"}
    assert invoke._endpoint_named(clients, "nothing", "prod") is None  # type: ignore[arg-type]
    assert invoke._endpoint_named(clients, "classifier", None) is None  # type: ignore[arg-type]
