"""`hfpipe invoke`: send requests to an environment's endpoint, or to `hfpipe local --serve`, and print the answers.

    hfpipe invoke EXECUTION|ENDPOINT --env dev --data '{"inputs": "..."}'
    hfpipe invoke EXECUTION --env dev --dialogue chat.txt          (summarization recipes)
    hfpipe invoke EXECUTION --env dev --file requests.jsonl        (one request per line: a batch)
    cat requests.jsonl | hfpipe invoke EXECUTION --env dev         (the same from standard input)
    hfpipe invoke --local [--port 8080] --dialogue chat.txt
    hfpipe invoke --local --recipe tiny-qa --data '{...}'          (checked against the recipe first)

Every request is checked before anything is sent with the `parse_request` of the handler the model serves:
the recipe's task kind names it (`training_code/inference_*.py`, its entry point's `code/inference.py`), its
serving kind the module that checks requests (hfpipe/kinds). The handlers ship inside the installed package,
so this works from the wheel too; with `--recipe` they are checked before any endpoint is looked at.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from hfpipe import contract, kinds
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError, UsageError
from hfpipe.cli.deploy import endpoint_cost, invoke_openai, named_endpoints
from hfpipe.cli.deploy.invoke_requests import read_requests
from hfpipe.cli.parser import LOCAL_EXCLUDES, LOCAL_PORT, Subparsers, aws_options, env_name, option_rules
from hfpipe.cli.recipe import recipes as cli_recipes
from hfpipe.cli.terminal import with_console
from hfpipe.core import json_text
from hfpipe.core.adapters import adapter_deploy, scale_to_zero
from hfpipe.core.run.cleanup import tags_of
from hfpipe.core.run.plan_model import Plan
from hfpipe.local.serving.endpoint import load_handler_module
from hfpipe.local.serving.serve import HOST as LOCAL_HOST
from hfpipe.local.serving.serve import RECIPE_HEADER, SERVING_KIND_HEADER, TASK_HEADER

# --- the handler contract -----------------------------------------------------------------------------


def kinds_of(task: Any, serving: Any) -> tuple[kinds.TaskKind, kinds.ServingKind]:
    """The task and serving kinds a model was trained and deployed with, or one error naming the unknown one."""
    try:
        return kinds.task_kind(task), kinds.serving_kind(serving or kinds.DEFAULT_SERVING_KIND)
    except kinds.KindError as err:
        raise HfpipeError(f"cannot check requests: {err}") from None


@functools.cache
def handler_module(name: str) -> ModuleType:
    """training_code/<name>.py loaded as a module (only its pure request parsing is used here): the copy the
    installed package ships, else the checkout's."""
    try:
        path = kinds.training_code_file(f"{name}.py")
    except kinds.KindError as err:
        raise HfpipeError(str(err)) from None
    # The handler imports its siblings (request_checks), next to it here as in the model's code/ directory.
    module = load_handler_module(path, f"hfpipe_handler_{name}")
    if not callable(getattr(module, "parse_request", None)):
        raise HfpipeError(f"training_code/{name}.py has no parse_request(data) to check requests with")
    return module


def check_with_kind(
    serving: kinds.ServingKind,
    task: kinds.TaskKind | None,
    requests: list[Any],
    sources: list[str],
    max_model_len: int | None = None,
) -> None:
    """Each request through the serving kind's own request contract (vllm: vLLM's rules, with the served
    context length where known), else through the task handler's parse_request; the first refused is an
    error, before anything is sent."""
    contract_check = serving.request_contract
    if contract_check is None:
        if task is not None:
            check_requests(requests, str(serving.request_checker(task.handler)), sources)
        return
    for request, source in zip(requests, sources, strict=True):
        try:
            contract_check(request, max_model_len)
        except ValueError as err:
            status = getattr(err, "status", None)
            answer = f" (the endpoint would answer {status})" if status else ""
            raise HfpipeError(
                f"{source} is not a request the endpoint accepts{answer}: {getattr(err, 'message', err)} "
                f"(the {serving.name} kind's request contract; nothing was sent)"
            ) from None


def check_requests(requests: list[Any], handler: str, sources: list[str]) -> None:
    """Each request through the handler's own parse_request; the first it refuses is an error."""
    module = handler_module(handler)
    for request, source in zip(requests, sources, strict=True):
        try:
            module.parse_request(request)
        except (ValueError, KeyError, TypeError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            raise HfpipeError(
                f"{source} is not a request the endpoint accepts: {message} "
                f"(checked with training_code/{handler}.py; nothing was sent)"
            ) from None


# --- where the requests go ------------------------------------------------------------------------------


_DEFAULT_SERVING = kinds.serving_kind(kinds.DEFAULT_SERVING_KIND)


@dataclass(frozen=True)
class Target:
    """An endpoint to send requests to: a SageMaker endpoint, or the local server."""

    name: str
    task: kinds.TaskKind | None  # None: nothing says what it serves (its execution and recipe are gone)
    serving: kinds.ServingKind = _DEFAULT_SERVING
    url: str | None = None  # the local server's base URL
    max_model_len: int | None = None  # the vllm kind's longest prompt + answer, where known
    #: The inference component a call selects (an adapter on a shared base: InferenceComponentName).
    component: str | None = None


def _target(name: str, task: str | None, serving: str | None, url: str | None = None) -> Target:
    found = kinds_of(task, serving) if task else (None, _DEFAULT_SERVING)
    return Target(name=name, task=found[0], serving=found[1], url=url)


def _kinds_of_recipe(recipe_name: str | None) -> tuple[str, str] | None:
    """(task, serving kind) of a bundled recipe, or None when it is not one (or no longer valid)."""
    from hfpipe.core.recipe import recipes as core_recipes
    from hfpipe.core.recipe.schema import RecipeError

    if not recipe_name or recipe_name not in core_recipes.available_recipes():
        return None
    try:
        recipe = core_recipes.resolve_recipe(recipe_name=recipe_name)
        return str(recipe["task"]), str(recipe["serving"]["kind"])
    except RecipeError:
        return None


def _describe_endpoint(sagemaker: Any, name: str) -> dict[str, Any] | None:
    import botocore.exceptions

    try:
        return dict(sagemaker.describe_endpoint(EndpointName=name))
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"ValidationException", "ResourceNotFound"}:
            return None
        raise aws.aws_error(exc, f"reading endpoint {name}") from None


def _endpoint_named(clients: aws.Clients, ref: str, env: str | None) -> dict[str, Any] | None:
    """The endpoint `ref` names in `env`: by its name, or a named endpoint by its cdk.json name (the rule
    `hfpipe endpoints delete` resolves NAME by: named_endpoints.resolve_name)."""
    if not env or ref.startswith("arn:"):
        return None
    return _describe_endpoint(clients.sagemaker, named_endpoints.resolve_name(clients.sagemaker, ref, env))


def _execution_named(clients: aws.Clients, ref: str, env: str | None) -> dict[str, Any]:
    """The execution `ref` names; where it could have been an endpoint's name too, the error says both."""
    try:
        return aws.resolve_execution(clients, ref, env)
    except HfpipeError as err:
        if not env or ref.startswith("arn:") or not str(err).startswith("unknown execution"):
            raise
        raise HfpipeError(
            f"no endpoint and no execution named {ref!r} in environment {env!r}: list them with "
            f"`hfpipe endpoints --env {env}` and `hfpipe list --env {env}`"
        ) from None


def resolve_target(clients: aws.Clients, ref: str, env: str | None) -> Target:
    """An endpoint by its name (tagged for `env`), a named endpoint by its cdk.json name (hfpipe-ENV-NAME), or
    the endpoint of the execution that created it."""
    plan: Plan | None = None
    endpoint = _endpoint_named(clients, ref, env)
    if endpoint is None:
        desc = _execution_named(clients, ref, env)
        # Only the plan the pipeline stored names the endpoint: never one written into the input.
        plan = aws.stored_plan(list(aws.execution_history(clients.sfn, desc["executionArn"])))
        if plan is None:
            raise aws.no_plan(desc, "it created no endpoint to invoke")
        if not plan.deploy:
            raise HfpipeError(
                f"execution {desc['name']!r} deploys no endpoint (its recipe sets deploy: false)"
            )
        name = plan.endpoint_name
        endpoint = _describe_endpoint(clients.sagemaker, name)
        if endpoint is None:
            raise HfpipeError(
                f"endpoint {name} of execution {desc['name']!r} does not exist ({desc['status']}): the pipeline "
                "deletes it after the smoke test unless it is kept; start with `hfpipe start ... --keep-endpoint`"
            )
        env = env or plan.env
    name = str(endpoint["EndpointName"])
    tags = tags_of(clients.sagemaker, endpoint["EndpointArn"])
    # One environment never touches another's resources, nor endpoints hfpipe did not create.
    if tags.get(contract.TAG_MANAGED_BY) != contract.PROJECT or (env and tags.get(contract.TAG_ENV) != env):
        owner = tags.get(contract.TAG_ENV)
        whose = f"environment {owner!r}" if owner else "no hfpipe environment"
        raise HfpipeError(f"endpoint {name} belongs to {whose} (tag {contract.TAG_ENV}), not {env!r}")
    status = endpoint.get("EndpointStatus")
    if status != "InService":
        raise HfpipeError(
            f"endpoint {name} is {status}, not InService: wait for it (`hfpipe endpoints --env {env}`)"
        )
    if plan is None and tags.get(contract.TAG_EXECUTION):
        try:
            desc = aws.resolve_execution(clients, tags[contract.TAG_EXECUTION], env)
            plan = aws.stored_plan(list(aws.execution_history(clients.sfn, desc["executionArn"])))
        except HfpipeError:
            plan = None  # the execution's history has expired; the recipe tag still names the handler
    # The plan says what the model serves (its task and serving kind), else the recipe its tag names.
    found = (
        (plan.task, plan.serving_kind)
        if plan is not None and plan.task
        else _kinds_of_recipe((plan.recipe_name if plan else None) or tags.get(contract.TAG_RECIPE))
    )
    target = _target(name, *(found or (None, None)))
    known = (plan.serving_environment if plan is not None else {}).get("SM_VLLM_MAX_MODEL_LEN")
    return dataclasses.replace(target, max_model_len=int(known)) if known and known.isdigit() else target


def local_target(port: int) -> Target:
    """The server `hfpipe local --serve` runs, after a GET /ping that says it is up and what it serves."""
    url = f"http://{LOCAL_HOST}:{port}"
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=10) as response:
            task = response.headers.get(TASK_HEADER)
            serving = response.headers.get(SERVING_KIND_HEADER)
            recipe = response.headers.get(RECIPE_HEADER) or "local"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise HfpipeError(
            f"nothing answers on {url}/ping ({reason}): start it with "
            f"`hfpipe local --recipe tiny-lora --serve --port {port}`, or pass the --port it prints"
        ) from None
    target = _target(f"{recipe} on {url}", task, serving, url)
    return invoke_openai.with_served_limits(target) if target.serving.speaks_openai else target


def send(clients: aws.Clients | None, target: Target, request: Any) -> tuple[Any, float]:
    """One request as application/json; returns the decoded answer and the round trip in milliseconds."""
    body = json.dumps(request).encode()
    started = time.perf_counter()
    if target.url is not None:
        http_request = invoke_openai.local_request(target.url, body, "application/json")
        try:
            with urllib.request.urlopen(http_request, timeout=600) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            detail = invoke_openai.http_error_detail(err)
            raise HfpipeError(f"{target.name} answered {err.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as err:
            raise HfpipeError(f"{target.name} did not answer: {getattr(err, 'reason', err)}") from None
    else:
        assert clients is not None
        answer = invoke_openai.call_endpoint(
            clients.runtime.invoke_endpoint,
            target.name,
            body,
            "application/json",
            target.component,
            lambda call: scale_to_zero.through_cold_start(call, _say_cold_start(target.name)),
        )
        raw = answer["Body"].read()
    latency_ms = round((time.perf_counter() - started) * 1000.0, 1)
    try:
        return json.loads(raw), latency_ms
    except (ValueError, UnicodeDecodeError):
        return raw.decode(errors="replace"), latency_ms


def _say_cold_start(name: str) -> Callable[[str], None]:
    """Where ``hfpipe invoke`` says it waits for a cold start and how long it took: stderr, so --json's
    stdout stays one record per answer (hfpipe.core.adapters.scale_to_zero.through_cold_start)."""

    def say(line: str) -> None:
        sys.stderr.write(f"{name}: {line}\n")
        sys.stderr.flush()

    return say


def with_adapter(clients: aws.Clients | None, target: Target, adapter: str, env: str | None) -> Target:
    """``target`` with one adapter selected: on AWS its inference component on that endpoint (read from
    SageMaker), served by the serving kind that serves adapters; locally the OpenAI `model` field, which needs
    a server that speaks OpenAI."""
    if clients is None:
        if not target.serving.speaks_openai:
            raise HfpipeError(
                f"--adapter selects an adapter by the OpenAI model field; {target.name} serves "
                f"{target.serving.name}, which takes no model field"
            )
        return target
    try:
        component = adapter_deploy.component_name(str(env), adapter)
    except adapter_deploy.AdapterRefused as err:
        raise HfpipeError(str(err)) from None
    held = [c for c in adapter_deploy.components_on(clients.sagemaker, target.name) if c.name == component]
    if not held or held[0].base is None:
        raise HfpipeError(
            f"--adapter {adapter!r}: endpoint {target.name} holds no adapter component {component}; "
            f"deployed adapters: `hfpipe endpoints --env {env}`"
        )
    # An adapter is served by the kind that serves adapters next to a base; its requests are checked by
    # that kind's contract (the task's handler is not in the path).
    adapters_kind = next(k for k in kinds.SERVING_KINDS.values() if k.serves_adapters)
    return dataclasses.replace(target, serving=adapters_kind, component=component)


def _resolve(args: argparse.Namespace, clients: aws.Clients | None) -> Target:
    """The local server or the named endpoint, with the --adapter it selects."""
    target = local_target(args.port) if clients is None else resolve_target(clients, args.endpoint, args.env)
    if args.adapter:
        return with_adapter(clients, target, args.adapter, args.env)
    if clients is not None and target.name == adapter_deploy.BaseNames.of(str(args.env)).endpoint:
        # SageMaker refuses a call to an inference-component endpoint that names no component ("Inference
        # Component Name header is required ..."): say which to name instead.
        held = adapter_deploy.adapter_names(
            str(args.env), adapter_deploy.adapters_left(clients.sagemaker, str(args.env))
        )
        raise HfpipeError(
            f"{target.name} is the shared base: it answers a call that names one of its adapters; accepted: "
            f"--adapter NAME (adapters on it: {', '.join(held) or 'none'})"
        )
    return target


def with_model_field(requests: list[Any], adapter: str | None) -> list[Any]:
    """The requests naming ``adapter`` in the OpenAI `model` field (how vLLM, and the local stand-in, route
    to an adapter); unchanged without one."""
    return [{**r, "model": adapter} if isinstance(r, dict) else r for r in requests] if adapter else requests


def _stream(clients: aws.Clients | None, target: Target, body: bytes) -> Iterator[bytes]:
    """The streamed answer's bytes: from the local server, or the endpoint (and its selected component)."""
    if target.url is not None:
        return invoke_openai.local_stream(target.url, body, target.name)
    runtime = clients.runtime if clients else None
    return invoke_openai.endpoint_stream(runtime, target.name, body, target.component)


# --- the command ------------------------------------------------------------------------------------------


def _summaries(answer: Any) -> list[str]:
    items = answer if isinstance(answer, list) else [answer]
    return [str(i["summary"]) for i in items if isinstance(i, dict) and "summary" in i]


def _check_dialogue(args: argparse.Namespace, task: kinds.TaskKind | None, name: str) -> None:
    if args.dialogue and task is not None and not task.takes_dialogue:
        takers = [k.name for k in kinds.TASK_KINDS.values() if k.takes_dialogue]
        raise HfpipeError(
            f"--dialogue is for the {', '.join(takers)} recipes; {name} serves {task.name} (handler "
            f"{task.handler}.py): send its request shape with --data or --file"
        )


def cmd_invoke(args: argparse.Namespace, console: Any) -> int:
    """Check the requests with the endpoint's handler, send them one by one, print answers and latency."""
    _check_target_options(args)
    # Requests that cannot be read, or that the --recipe's handler refuses, fail before the server or AWS
    # is looked at.
    requests, sources = read_requests(args)

    def shaped(serving: kinds.ServingKind) -> list[Any]:  # the kind's request contract (OpenAI's for vllm)
        if args.stream and not serving.speaks_openai:
            raise HfpipeError(
                f"--stream needs a serving kind that streams (vllm); this one is {serving.name}"
            )
        return (
            [invoke_openai.openai_request(r, args.stream) for r in requests]
            if serving.speaks_openai
            else requests
        )

    recipe = None
    if args.recipe:  # validated as `hfpipe start` would
        resolved = cli_recipes.load(args.recipe, []).resolved
        recipe = kinds_of(resolved["task"], resolved["serving"]["kind"])
        _check_dialogue(args, recipe[0], f"recipe {args.recipe!r}")
        check_with_kind(recipe[1], recipe[0], shaped(recipe[1]), sources)
    clients = None if args.local else aws.clients_for(args)
    target = _resolve(args, clients)
    if recipe is not None and target.task is not None and target.task != recipe[0]:
        raise HfpipeError(
            f"--recipe {args.recipe!r} is a {recipe[0].name} recipe; {target.name} serves {target.task.name}"
        )
    _check_dialogue(args, target.task, target.name)
    requests = with_model_field(shaped(target.serving), args.adapter if clients is None else None)
    check_with_kind(target.serving, target.task, requests, sources, target.max_model_len)
    for index, request in enumerate(requests, start=1):
        if args.stream:
            body = json.dumps(request).encode()
            pieces = _stream(clients, target, body)
            source = target.name if target.url is not None else f"endpoint {target.name}"
            invoke_openai.print_stream(pieces, target.name, index, args.json, console, source)
        else:
            answer, latency_ms = send(clients, target, request)
            if clients is not None:  # its tokens, where `hfpipe endpoints` prices them (endpoint_cost)
                endpoint_cost.record_tokens(clients, target.name, target.component, answer)
            _print_answer(args, console, target.name, index, len(requests), answer, latency_ms)
    return 0


def _check_target_options(args: argparse.Namespace) -> None:
    """--local (with a port, without an endpoint name), or an EXECUTION or ENDPOINT name with --env."""
    if args.local:
        if args.endpoint:
            raise UsageError(
                f"--local talks to `hfpipe local --serve`; drop the endpoint name {args.endpoint!r}"
            )
        if not 0 < args.port < 65536:
            raise UsageError(f"--port {args.port} is not accepted; accepted: 1 to 65535")
    elif not args.endpoint:
        raise UsageError("hfpipe invoke needs an EXECUTION or ENDPOINT name (with --env), or --local")
    elif args.env:
        aws.validate_env_name(args.env)


def _print_answer(
    args: argparse.Namespace, console: Any, name: str, index: int, count: int, answer: Any, latency_ms: float
) -> None:
    """One answer: a JSON line with --json, else its summaries or texts (or the answer itself) and latency."""
    if args.json:
        record = {"request": index, "endpoint": name, "latency_ms": latency_ms, "response": answer}
        sys.stdout.write(json_text.dumps(record) + "\n")
        sys.stdout.flush()
        return
    label = f"request {index}/{count}" if count > 1 else "answer"
    console.print(f"{label} from {name} in {latency_ms:.1f} ms")
    summaries = _summaries(answer) or invoke_openai.answer_texts(answer)
    if summaries:
        for summary in summaries:
            # A tiny random model may stop at once: say so rather than print nothing.
            console.print(f"summary: {summary or '(empty)'}", markup=False)
    else:
        console.print(json_text.dumps(answer, indent=2), markup=False)


# --- hfpipe invoke ---------------------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe invoke`'s arguments and help."""
    p = sub.add_parser("invoke", help="send requests to an endpoint (or to `hfpipe local --serve`)")
    p.add_argument(
        "endpoint",
        nargs="?",
        metavar="EXECUTION|ENDPOINT",
        help="the execution that created the endpoint, or the endpoint's name (with --env)",
    )
    p.add_argument("--env", type=env_name, help="environment of the execution or endpoint")
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
    p.add_argument(
        "--port", type=int, default=LOCAL_PORT, help=f"port of the local server (default {LOCAL_PORT})"
    )
    p.add_argument(
        "--adapter",
        metavar="NAME",
        help="one adapter of a shared base: its inference component (InferenceComponentName "
        "hfpipe-ENV-adapter-NAME), or with --local the OpenAI model field",
    )
    aws_options(p)
    one_source = "give the requests one way: --data, --file or --dialogue"
    option_rules(
        p,
        needs={"--port": "--local"},
        excludes={
            **LOCAL_EXCLUDES,
            ("--data", "--file"): one_source,
            ("--data", "--dialogue"): one_source,
            ("--file", "--dialogue"): one_source,
        },
    )
    p.set_defaults(func=with_console(cmd_invoke), command_parser=p)
