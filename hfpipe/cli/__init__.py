"""hfpipe: the command-line tool of the pipelines (console script `hfpipe = hfpipe.cli:main`).

    hfpipe recipes                      list the recipes; `recipes show NAME` prints one, resolved
    hfpipe start --env dev --recipe NAME [--set key=value ...] [--name N] [--keep-endpoint] [--watch]
    hfpipe watch EXECUTION [--env dev]  live view until it ends, then the report
    hfpipe list --env dev               recent executions and the endpoints they left up
    hfpipe stop EXECUTION [--env dev] [--yes]  stop the execution, its training job and its endpoint
    hfpipe cleanup --env dev [--older-than 7d] [--yes]
    hfpipe report EXECUTION [--env dev] [--plot loss.png] [--json]
    hfpipe data upload PATH --env dev [--name N] [--recipe NAME]
    hfpipe invoke EXECUTION|ENDPOINT --env dev --data JSON | --file F | --dialogue F   (or --local)
    hfpipe endpoints --env dev          endpoints up and their cost; `endpoints delete NAME` deletes one
    hfpipe models --env dev [--recipe NAME]   registered model versions; `models approve|reject RECIPE/N`,
                                        `models compare A B`, `models download RECIPE/N [--to DIR]`
    hfpipe deploy --env prod --model RECIPE/N --endpoint NAME   an approved version onto a named endpoint
                                        (created, or updated blue/green with automatic rollback)
    hfpipe logs EXECUTION --env dev [--follow] [--since 10m]   the training log (or --local)
    hfpipe promote RECIPE/N --env prod [--watch]   copy an approved version of the environment prod
                                        promotes from (cdk.json promote_from) into prod's registry
    hfpipe local --recipe NAME [--serve [--port 8080]]   the pipeline on this machine; then serve the model
    hfpipe local up --env dev [--port N]   serve environment dev here; HFPIPE_LOCAL=1 sends commands to it
    hfpipe local prune [--keep N]       remove old local runs under .hfpipe/local, keeping the newest N
    hfpipe completion bash|zsh|tcsh     a completion script: eval "$(hfpipe completion bash)"

Exit status: 0 success; 1 a one-line `error: ...` on stderr (or, for `watch`/`start --watch`, an execution
that did not succeed; for `logs --follow`, a job that did not complete; under an AWS fault, the line ends with
what still runs and what to run next: hfpipe.cli.faults); 2 bad command-line usage, argparse's or one the
command finds (`hfpipe` or `hfpipe data` alone prints its help on stdout; a mistyped command, option or choice
gets "did you mean"); 130 interrupted (Ctrl-C ending `local --serve` is its normal end: 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from hfpipe import __version__
from hfpipe.cli import faults
from hfpipe.cli.parser import Parser, actions

#: What add_subparsers returns (argparse's private class, named once).
Subparsers = argparse._SubParsersAction


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("AWS")
    group.add_argument("--profile", help="AWS profile (default: AWS_PROFILE or the default profile)")
    group.add_argument(
        "--region",
        help="AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region)",
    )


def _recipe_arguments(
    parser: argparse.ArgumentParser, example: str, required: bool = True, also: str = ""
) -> None:
    """--recipe and --set, as start and local take them (``also``: what else --set does there)."""
    parser.add_argument(
        "--recipe", required=required, help="recipe name (see `hfpipe recipes`) or path to a recipe file"
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override one recipe field, e.g. --set {example} (repeatable){also}",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    from hfpipe.cli import commands

    parser = Parser(
        prog="hfpipe",
        description="Hugging Face fine-tuning pipelines on Amazon SageMaker, as code.",
    )
    parser.add_argument("--version", action="version", version=f"hfpipe {__version__}")
    # Not required: a bare `hfpipe` (or `hfpipe data`) prints its help (main).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.set_defaults(command_parser=parser)

    for add in (
        _add_recipes,
        _add_start,
        _add_watch_stop_report,
        _add_list,
        _add_cleanup,
        _add_data,
        _add_invoke,
        _add_endpoints,
        _add_models,
        _add_deploy,
        _add_logs,
        _add_promote,
        _add_completion,
        _add_local,
    ):
        add(sub, commands)
    # The completion script walks the whole parser.
    sub.choices["completion"].set_defaults(root_parser=parser)
    return parser


def _add_recipes(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe recipes`."""
    p = sub.add_parser("recipes", help="list the recipes, or show one resolved")
    actions(
        p,
        {
            "list": "the recipes with task, instances and estimated cost (the default)",
            "show": "one recipe (NAME or a path), resolved with its defaults, and every documented field",
        },
    )
    p.add_argument("name", nargs="?", help="recipe name or path (for `show`)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one recipe field before showing it (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print JSON only (the list, or the resolved recipe)")
    p.set_defaults(func=commands.cmd_recipes, command_parser=p)


def _add_start(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe start`."""
    p = sub.add_parser("start", help="validate a recipe and start an execution in an environment")
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    _recipe_arguments(p, "training.hyperparameters.num_train_epochs=1")
    p.add_argument("--name", help="execution name (default: <recipe>-<UTC time>)")
    p.add_argument("--watch", action="store_true", help="watch the execution until it ends")
    p.add_argument(
        "--keep-endpoint",
        action="store_true",
        help="keep the endpoint after the smoke test (billed per hour until `hfpipe endpoints delete`)",
    )
    p.add_argument(
        "--interval",
        type=float,
        help="seconds between refreshes with --watch (default 10; 1 in a local world)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="show the plan, the cost estimate and the CreateTrainingJob request; start nothing",
    )
    p.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    _common(p)
    p.set_defaults(func=commands.cmd_start, command_parser=p)


def _add_watch_stop_report(sub: Subparsers, commands: ModuleType) -> None:
    """watch, stop and report: one execution, by ARN or by name with --env."""
    for name, help_text, func in (
        ("watch", "live view of an execution until it ends, then its report", commands.cmd_watch),
        ("stop", "stop an execution, its training job and the endpoint it created", commands.cmd_stop),
        ("report", "metrics, cost and artifacts of an execution", commands.cmd_report),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "execution",
            metavar="EXECUTION",
            # `report --local` defaults to the newest local run.
            nargs="?" if name == "report" else None,
            help="execution ARN, or its name together with --env"
            + (" (with --local: a local run's name; default: the newest)" if name == "report" else ""),
        )
        p.add_argument("--env", help="environment whose state machine ran EXECUTION (when it is a name)")
        if name == "watch":
            p.add_argument(
                "--interval", type=float, help="seconds between refreshes (default 10; 1 in a local world)"
            )
        if name == "stop":
            p.add_argument(
                "--keep-endpoint", action="store_true", help="leave an endpoint the execution already created"
            )
            p.add_argument(
                "--yes", action="store_true", help="delete its endpoint/config/model without asking (CI)"
            )
            p.add_argument(
                "--wait-timeout",
                metavar="AGE",
                help="how long to wait for an endpoint still Creating/Updating before deleting it (default 15m)",
            )
        if name == "report":
            p.add_argument(
                "--plot", metavar="FILE.png", help="write the training/eval loss curves to FILE.png"
            )
            p.add_argument("--json", action="store_true", help="print the report as JSON")
            p.add_argument("--local", action="store_true", help="a local run's report (hfpipe local)")
            p.add_argument(
                "--out",
                help="folder of the local runs (with --local; default: .hfpipe/local in the checkout)",
            )
        _common(p)
        p.set_defaults(func=func, command_parser=p)


def _add_list(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe list`."""
    p = sub.add_parser("list", help="recent executions of an environment, and the endpoints they left up")
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    p.add_argument(
        "--status",
        choices=["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"],
        help="only executions with this status",
    )
    p.add_argument("--max", type=int, default=20, help="at most this many (default 20)")
    p.add_argument("--json", action="store_true", help="print the executions as JSON")
    _common(p)
    p.set_defaults(func=commands.cmd_list, command_parser=p)


def _add_cleanup(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe cleanup`."""
    p = sub.add_parser("cleanup", help="delete the endpoints, configs and models the pipeline left (by tag)")
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    p.add_argument("--older-than", metavar="AGE", help="only resources older than AGE: 30m, 12h, 7d, 2w")
    p.add_argument("--yes", action="store_true", help="do not ask before deleting (CI)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted and stop")
    p.add_argument(
        "--wait-timeout",
        metavar="AGE",
        help="how long to wait for an endpoint still Creating/Updating before deleting it (default 15m)",
    )
    _common(p)
    p.set_defaults(func=commands.cmd_cleanup, command_parser=p)


def _add_data(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe data`."""
    p = sub.add_parser("data", help="data sets in the environment's data bucket")
    p.set_defaults(command_parser=p)
    data_sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    up = data_sub.add_parser("upload", help="upload JSON, JSONL, parquet or a save_to_disk folder")
    up.add_argument(
        "path", metavar="PATH", help="a .json, .jsonl or .parquet file, or a datasets save_to_disk folder"
    )
    up.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    up.add_argument("--name", help="prefix in the data bucket (default: <file name>-<UTC time>)")
    up.add_argument(
        "--recipe", help="check that the records hold what this recipe's training script reads first"
    )
    _common(up)
    up.set_defaults(func=commands.cmd_data_upload, command_parser=up)


def _add_invoke(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe invoke`."""
    p = sub.add_parser("invoke", help="send requests to an endpoint (or to `hfpipe local --serve`)")
    p.add_argument(
        "endpoint",
        nargs="?",
        metavar="EXECUTION|ENDPOINT",
        help="the execution that created the endpoint, or the endpoint's name (with --env)",
    )
    p.add_argument("--env", help="environment of the execution or endpoint")
    p.add_argument("--data", metavar="JSON", help="one request, as JSON")
    p.add_argument("--file", metavar="PATH", help="a JSON request, or one request per line (JSON lines)")
    p.add_argument("--dialogue", metavar="FILE", help="a chat to summarize (summarization recipes)")
    p.add_argument(
        "--parameters", metavar="JSON", help="generation/pipeline parameters, e.g. '{\"top_p\": 0.9}'"
    )
    p.add_argument("--json", action="store_true", help="one JSON line per answer, with its latency")
    p.add_argument(
        "--stream",
        action="store_true",
        help="print the answer as it is generated, then time to first token and tokens/s (vllm serving kind)",
    )
    p.add_argument("--local", action="store_true", help="send to `hfpipe local --serve` on 127.0.0.1")
    p.add_argument(
        "--recipe",
        metavar="NAME|PATH",
        help="the recipe the model was trained with: requests are checked against its handler first",
    )
    p.add_argument("--port", type=int, default=8080, help="port of the local server (default 8080)")
    p.add_argument(
        "--adapter",
        metavar="NAME",
        help="one adapter of a shared base: its inference component (InferenceComponentName "
        "hfpipe-ENV-adapter-NAME), or with --local the OpenAI model field",
    )
    _common(p)
    p.set_defaults(func=commands.cmd_invoke, command_parser=p)


def _add_endpoints(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe endpoints`."""
    p = sub.add_parser("endpoints", help="the environment's endpoints and their cost; delete one")
    actions(
        p,
        {
            "list": "the environment's endpoints, their status and cost (the default)",
            "delete": "delete endpoint NAME with its config and model (asks first, unless --yes)",
        },
    )
    p.add_argument("name", nargs="?", help="endpoint name (for `delete`)")
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    p.add_argument("--yes", action="store_true", help="do not ask before deleting (CI)")
    p.add_argument("--json", action="store_true", help="print the endpoints as JSON")
    p.add_argument(
        "--wait-timeout",
        metavar="AGE",
        help="how long to wait for an endpoint still Creating/Updating before deleting it (default 15m)",
    )
    _common(p)
    p.set_defaults(func=commands.cmd_endpoints, command_parser=p)


def _add_models(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe models`."""
    p = sub.add_parser("models", help="registered model versions: list, approve, reject, compare, download")
    actions(
        p,
        {
            "list": "the environment's registered versions, newest first (the default)",
            "approve": "approve VERSION, so it can be deployed or promoted",
            "reject": "reject VERSION",
            "compare": "two versions' metrics, cost and lineage side by side",
            "download": "unpack VERSION's model into --to DIR (default ./RECIPE-N), with its metadata",
        },
    )
    p.add_argument(
        "refs", nargs="*", metavar="VERSION", help="RECIPE/N or a version ARN (one to decide, two to compare)"
    )
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    p.add_argument("--recipe", help="only this recipe's versions (list)")
    p.add_argument("--reason", help="the approval description (approve, reject)")
    p.add_argument(
        "--to", metavar="DIR", help="download: a new or empty folder for the model (default ./RECIPE-N)"
    )
    p.add_argument("--json", action="store_true", help="print JSON (list, compare)")
    _common(p)
    p.set_defaults(func=commands.cmd_models, command_parser=p)


def _add_deploy(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe deploy`."""
    p = sub.add_parser(
        "deploy",
        help="put an approved model version on a named endpoint (blue/green), or an adapter on the shared base",
    )
    p.add_argument("--env", required=True, help="environment name (as in cdk.json)")
    p.add_argument("--model", metavar="VERSION", help="RECIPE/N or a version ARN, approved")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", metavar="NAME", help="an endpoint of the environment in cdk.json")
    target.add_argument(
        "--adapter",
        metavar="NAME",
        help="an adapter on the environment's shared base (docs/adapters.md): with --model, --rollback or --delete",
    )
    p.add_argument(
        "--rollback", action="store_true", help="with --adapter: back to the previous approved version"
    )
    p.add_argument(
        "--delete", action="store_true", help="with --adapter: take the adapter off the shared base"
    )
    p.add_argument("--no-wait", action="store_true", help="start the deploy and return")
    p.add_argument(
        "--interval",
        type=float,
        help="seconds between looks at the endpoint (default 15; 1 in a local world)",
    )
    _common(p)
    p.set_defaults(func=commands.cmd_deploy, command_parser=p)


def _add_logs(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe logs`."""
    p = sub.add_parser("logs", help="an execution's training log (every instance), or a local run's")
    p.add_argument(
        "execution", nargs="?", metavar="EXECUTION", help="execution ARN, or its name together with --env"
    )
    p.add_argument("--env", help="environment whose state machine ran EXECUTION (when it is a name)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the training job ends")
    p.add_argument("--since", metavar="AGE", help="only lines from the last AGE: 30s, 10m, 2h, 1d")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between polls with --follow")
    p.add_argument("--json", action="store_true", help="one JSON object per log line")
    p.add_argument("--local", action="store_true", help="a local run's training.log (default: the newest)")
    p.add_argument(
        "--out", help="folder of the local runs (with --local; default: .hfpipe/local in the checkout)"
    )
    _common(p)
    p.set_defaults(func=commands.cmd_logs, command_parser=p)


def _add_promote(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe promote`."""
    p = sub.add_parser(
        "promote", help="copy an approved version of the source environment into this one (promote_from)"
    )
    p.add_argument(
        "version", metavar="VERSION", help="RECIPE/N or a version ARN of the environment --env promotes from"
    )
    p.add_argument(
        "--env", required=True, help="the target environment (its cdk.json entry names promote_from)"
    )
    p.add_argument("--watch", action="store_true", help="wait for the promotion and print the new version")
    p.add_argument(
        "--interval", type=float, help="seconds between checks with --watch (default 5; 1 in a local world)"
    )
    p.add_argument("--json", action="store_true", help="with --watch: print the execution's output as JSON")
    _common(p)
    p.set_defaults(func=commands.cmd_promote, command_parser=p)


def _add_completion(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe completion`."""
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or tcsh)")
    p.add_argument("shell", choices=["bash", "zsh", "tcsh"], help="the shell to complete in")
    p.set_defaults(func=commands.cmd_completion, command_parser=p)


def _add_local(sub: Subparsers, commands: ModuleType) -> None:
    """`hfpipe local`."""
    p = sub.add_parser(
        "local", help="run a recipe end to end on this machine, no AWS account; or serve an environment"
    )
    actions(
        p,
        {
            "up": "serve --env ENV of cdk.json here until Ctrl-C (commands reach it with HFPIPE_LOCAL=1)",
            "down": "stop the environment --env ENV serves",
            "status": "the environments up on this machine",
            "prune": "remove old local runs under --out, keeping the newest --keep N",
        },
        default=None,  # none: run --recipe
    )
    # --recipe not with up/down/status; --set with up: a setting of ENV's cdk.json entry, in that world only.
    _recipe_arguments(
        p,
        "training.hyperparameters.max_steps=8",
        required=False,
        also="; with up: a setting of ENV's cdk.json entry in this local world only, e.g. --set "
        "shared_base.base_model=hfpipe-fixtures/tiny-llama",
    )
    p.add_argument("--env", help="with up/down: the environment of cdk.json to serve or stop")
    p.add_argument(
        "--time-scale",
        type=float,
        default=0.01,
        help="with up: waits take this many times their seconds (default 0.01: a 300 s wait takes 3 s)",
    )
    p.add_argument(
        "--out",
        help="folder for the run's model.tar.gz, log, metrics and report (default: .hfpipe/local in the checkout)",
    )
    p.add_argument(
        "--keep", type=int, metavar="N", help="with prune: keep the newest N local runs (default 5)"
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="after the run, serve the model on 127.0.0.1 (GET /ping, POST /invocations) until Ctrl-C",
    )
    p.add_argument(
        "--port",
        type=int,
        help="port for --serve (default 8080) or for up (default: any free port); 0: any free",
    )
    p.add_argument(
        "--channel",
        action="append",
        dest="channels",
        metavar="NAME=FOLDER",
        help="run with a local folder as input channel NAME (repeatable), e.g. training=./data",
    )
    p.set_defaults(func=commands.cmd_local, command_parser=p)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (the console script exits with it)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        if args.command is None or (args.command == "data" and args.data_command is None):
            # `hfpipe` (or `hfpipe data`) alone: what there is to run, not one line.
            args.command_parser.print_help()
            return 2
        if extra:
            # The subcommand's own usage and error, not the top level's (`hfpipe start --bogus`).
            args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "local" and args.action is None and args.recipe is None:
            args.command_parser.error("the following arguments are required: --recipe")
    except SystemExit as exc:  # argparse has printed usage and the problem
        return int(exc.code or 0)
    return faults.run(args.func, args)
