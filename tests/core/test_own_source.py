"""A recipe's own training code (training.source, docs/own-code.md): the recipe rules, the one deterministic
packing and what it refuses, the command's packing of dir and git sources, and the Plan's checks of the
uploaded archive (this environment's sources/ only, existing, with the hash the input names)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from own_sources import SPOT_RECIPE, git, squad_recipe_from, tagged_then_changed, transformers_at_v461
from plan_config import dev_config

from hfpipe import contract
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.recipe import sources as cli_sources
from hfpipe.core.recipe import sourcedir
from hfpipe.core.recipe.recipes import load_recipe, resolve_recipe
from hfpipe.core.recipe.schema import RecipeError
from hfpipe.core.run.plan import accept, build_plan

ARTIFACTS = "hfpipe-dev-artifacts"
SHA = "a" * 64


def recipe_with(source: Any, entry_point: str = "train.py", **hp: Any) -> dict[str, Any]:
    recipe = copy.deepcopy(load_recipe("tiny-qa"))
    recipe["training"]["source"] = source
    recipe["training"]["entry_point"] = entry_point
    if hp:
        recipe["training"]["hyperparameters"] = hp
    return recipe


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({}, r"recipe\.training\.source: \[\] is not accepted; accepted: exactly one of 'dir'"),
        ({"dir": "a", "s3": f"s3://{ARTIFACTS}/x.tar.gz"}, r"source: \['dir', 's3'\] .*exactly one of"),
        (
            {"dir": "../elsewhere"},
            r"source\.dir: '\.\./elsewhere' is not accepted; accepted: a relative folder path",
        ),
        ({"dir": "/abs/path"}, r"source\.dir: '/abs/path' is not accepted"),
        ({"dir": "scripts", "sha256": SHA}, r"source\.sha256: accepted: with 's3' only"),
        (
            {"s3": f"s3://{ARTIFACTS}/s.tar.gz"},
            r"source\.sha256: accepted: with 's3' only, and there required",
        ),
        ({"s3": f"s3://{ARTIFACTS}/s.tar.gz", "sha256": "XYZ"}, r"source\.sha256: .*64 lower-case hex"),
        (
            {"s3": f"s3://{ARTIFACTS}/s.zip", "sha256": SHA},
            r"source\.s3: .* accepted: the URI of a \.tar\.gz",
        ),
        ({"git": {"repo": "--upload-pack=evil"}}, r"source\.git\.repo: .*not starting with '-'"),
        (
            {"git": {"repo": "r", "tag": "v1", "branch": "main"}},
            r"source\.git: \['branch', 'tag'\] given; accepted: at most one of them .*with or without 'commit'",
        ),
        ({"git": {"repo": "r", "commit": "main"}}, r"source\.git\.commit: 'main' .*7 to 40 lower-case hex"),
        ({"git": {"repo": "r", "tag": "-x"}}, r"source\.git\.tag: '-x' .*not starting with '-'"),
        ({"git": {"repo": "r", "path": "a/../../b"}}, r"source\.git\.path: 'a/\.\./\.\./b' is not accepted"),
        ({"git": {"repo": "r", "depth": 1}}, r"source\.git: unknown field\(s\) \['depth'\]"),
        ({"dir": "s", "include": ["../.env"]}, r"source\.include\[0\]: '\.\./\.env' is not accepted"),
        (
            {"dir": "s", "exclude": ["../x"]},
            r"source\.exclude\[0\]: '\.\./x' is not accepted; accepted: a glob",
        ),
        (
            {"git": {"repo": "https://h/r.git", "token": "ghp_abc"}},
            r"source\.git\.token: a value written in the recipe is not accepted .*accepted: '\$\{NAME\}'",
        ),
        (
            {"git": {"repo": "https://h/r.git", "username": "u", "password": "hunter2"}},
            r"source\.git\.password: a value written in the recipe is not accepted",
        ),
        (
            {"git": {"repo": "https://u:p@h/r.git"}},
            r"source\.git\.repo: a URL with credentials in it is not accepted",
        ),
        ({"git": {"repo": "r", "2FA_enabled": "yes"}}, r"source\.git\.2FA_enabled"),
    ],
)
def test_a_bad_source_is_refused_in_one_line_naming_the_field(source: Any, message: str) -> None:
    with pytest.raises(RecipeError, match=message) as err:
        resolve_recipe(recipe_with(source))
    assert "\n" not in str(err.value)


def test_own_scripts_hyperparameters_are_not_checked_against_the_projects_parser() -> None:
    # run_qa.py is the project's script name too; a team's run_qa.py (the transformers example) has its own
    # arguments, so the project's parser must not judge them.
    resolve_recipe(recipe_with({"dir": "scripts"}, "run_qa.py", not_a_project_argument=1))
    with pytest.raises(RecipeError, match=r"not_a_project_argument: not an argument of run_qa\.py"):
        resolve_recipe(recipe_with(None, "run_qa.py", not_a_project_argument=1))


# --- packing -----------------------------------------------------------------------------------------------


def make_source(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "lib" / "util.py").write_text("X = 1\n")
    (root / "requirements.txt").write_text("")
    return root


def test_packing_is_deterministic_and_records_what_it_leaves_out_and_why(tmp_path: Path) -> None:
    first, second = make_source(tmp_path / "a"), make_source(tmp_path / "b")
    (second / ".git").mkdir()
    (second / ".git" / "config").write_text("[core]\n")
    (second / "lib" / "__pycache__").mkdir()
    (second / "lib" / "__pycache__" / "util.cpython-312.pyc").write_bytes(b"\x00")
    (second / "old.pyc").write_bytes(b"\x00")
    (second / ".env").write_text("HF_TOKEN=secret\n")
    (second / "deploy.pem").write_text("key\n")
    one, two = sourcedir.pack(first), sourcedir.pack(second)
    assert one.data == two.data and one.sha256 == two.sha256 == hashlib.sha256(one.data).hexdigest()
    assert one.files == ("lib/util.py", "requirements.txt", "train.py") and one.skipped == ()
    # A folder once, not its files; each with why.
    assert two.skipped == (
        (".env", "looks like a secret; list it in training.source.include"),
        (".git/", "git's own folder"),
        ("deploy.pem", "looks like a secret; list it in training.source.include"),
        ("lib/__pycache__/", "Python's bytecode cache"),
        ("old.pyc", "compiled Python"),
    )
    assert two.skipped_secrets == (".env", "deploy.pem")
    listed = sourcedir.pack(second, include=[".env"])
    assert (
        ".env" in listed.files and listed.sha256 != one.sha256 and listed.skipped_secrets == ("deploy.pem",)
    )


def test_a_symlink_out_of_the_folder_is_refused_one_inside_is_packed(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    (source / "inside.py").symlink_to(source / "train.py")
    assert "inside.py" in sourcedir.pack(source).files
    (tmp_path / "secret.txt").write_text("outside\n")
    (source / "data.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(
        sourcedir.SourceError, match=r"source 'data.txt': a symlink to .*outside the source folder"
    ):
        sourcedir.pack(source)
    (source / "data.txt").unlink()
    (source / "up").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(sourcedir.SourceError, match=r"source 'up': a symlink to .*outside"):
        sourcedir.pack(source)


def test_a_link_out_at_any_level_is_refused_naming_it(tmp_path: Path) -> None:
    """The named folder itself, a folder on the way to a file, or a file: each resolved after every link and
    refused when it leaves (the recipe's folder for `dir`; the source folder for what is packed)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n")
    team = tmp_path / "team"
    team.mkdir()
    (team / "scripts").symlink_to(home, target_is_directory=True)
    ref = str(team / "recipe.json")
    with pytest.raises(
        HfpipeError,
        match=r"^recipe\.training\.source\.dir: 'scripts': 'scripts' is a symlink to '.*home', outside the recipe's "
        r"folder '.*team'; accepted: a folder inside it, with no link out at any level$",
    ):
        cli_sources.pack_source(ref, resolve_recipe(recipe_with({"dir": "scripts"})), say=print)
    (team / "scripts").unlink()
    make_source(team / "scripts")
    (team / "scripts" / "lib" / "keys").symlink_to(home / ".ssh", target_is_directory=True)
    with pytest.raises(
        HfpipeError, match=r"source 'lib/keys': a symlink to '.*\.ssh', outside the source folder"
    ):
        cli_sources.pack_source(ref, resolve_recipe(recipe_with({"dir": "scripts"})), say=print)


def test_only_regular_files_are_packed_and_a_link_loop_is_a_clear_error(tmp_path: Path) -> None:
    import os
    import socket
    import threading

    source = make_source(tmp_path / "src")
    os.mkfifo(source / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(source / "sock"))
    result: list[Any] = []
    # A pipe opened for reading blocks until a writer comes: packing must never open one.
    worker = threading.Thread(target=lambda: result.append(sourcedir.pack(source)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    listener.close()
    assert result, "packing blocked on the named pipe"
    assert ("pipe", "a named pipe: only regular files are packed") in result[0].skipped
    assert ("sock", "a socket: only regular files are packed") in result[0].skipped
    assert result[0].files == ("lib/util.py", "requirements.txt", "train.py")
    (source / "pipe").unlink()
    (source / "sock").unlink()
    (source / "a.py").symlink_to(source / "b.py")
    (source / "b.py").symlink_to(source / "a.py")
    with pytest.raises(
        sourcedir.SourceError, match=r"^source '.\.py': a symlink loop; accepted: links that end"
    ):
        sourcedir.pack(source)
    (source / "a.py").unlink()
    (source / "b.py").unlink()
    (source / "gone.py").symlink_to(source / "nowhere.py")
    with pytest.raises(
        sourcedir.SourceError, match=r"source 'gone\.py': a symlink to '.*nowhere\.py', which does "
    ):
        sourcedir.pack(source)


@pytest.mark.parametrize(
    "name",
    [".envrc", ".git-credentials", ".npmrc", "cert.p12", ".docker/config.json", "credentials.json", "id_ed25519",
     "gcp-service-account.json", ".pgpass", "prod.tfvars", ".ssh/config"],
)  # fmt: skip
def test_files_named_like_secrets_are_not_packed(tmp_path: Path, name: str) -> None:
    source = make_source(tmp_path / "src")
    (source / name).parent.mkdir(parents=True, exist_ok=True)
    (source / name).write_text("secret\n")
    packed = sourcedir.pack(source)
    assert name not in packed.files and packed.skipped_secrets == (name,)
    assert name in sourcedir.pack(source, include=[name]).files


def test_the_recipes_exclude_list_modes_and_a_git_file(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    (source / ".venv" / "lib").mkdir(parents=True)
    (source / ".venv" / "lib" / "big.so").write_bytes(b"\0" * 1000)
    (source / "data.csv").write_text("a,b\n")
    (source / ".git").write_text("gitdir: /home/someone/repo/.git/worktrees/w\n")  # a worktree's .git file
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o750)
    (source / "train.py").chmod(0o600)
    packed = sourcedir.pack(source, exclude=[".venv/", "*.csv"])
    assert packed.files == ("lib/util.py", "requirements.txt", "run.sh", "train.py")
    assert packed.skipped == (
        (".git", "git's own file"),
        (".venv/", "matches training.source.exclude"),
        ("data.csv", "matches training.source.exclude"),
    )
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(packed.data)) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    # As git records a file: executable or not (the SDK's archive keeps each file's mode).
    assert modes == {"lib/util.py": 0o644, "requirements.txt": 0o644, "run.sh": 0o755, "train.py": 0o644}


def test_a_dir_written_as_the_sdks_source_dir_is_accepted(tmp_path: Path) -> None:
    make_source(tmp_path / "scripts")
    ref = str(tmp_path / "recipe.json")
    packed = {
        written: cli_sources.pack_source(
            ref, resolve_recipe(recipe_with({"dir": written})), say=lambda _: None
        )
        for written in ("scripts", "./scripts", "scripts/", "./scripts/")
    }
    assert len({p.sha256 for p in packed.values() if p is not None}) == 1


def test_the_archive_size_is_bounded(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    (source / "weights.bin").write_bytes(b"\x01" * 4096)
    # The largest parts are named, and what would leave them out (training.source.exclude).
    with pytest.raises(
        sourcedir.SourceError,
        match=r"more than 2\.0 KiB \(largest: weights\.bin \(4\.0 KiB\), train\.py \(15 B\), lib/ \(6 B\)\); "
        r"accepted: code of at most that size \(list what is not code in training\.source\.exclude",
    ):
        sourcedir.pack(source, max_bytes=2048)
    assert sourcedir.pack(source, exclude=["*.bin"], max_bytes=2048).files
    assert sourcedir.pack(source, max_bytes=8192).files


def local_repository(root: Path) -> Path:
    """A git repository made here (nothing downloaded): examples/train.py at tag v1, changed after it."""
    make_source(root / "examples")
    return tagged_then_changed(root, "main", "v1", root / "examples" / "train.py", "print('two')\n")


def test_a_git_source_is_cloned_at_its_tag_and_packed_from_its_sub_folder(tmp_path: Path) -> None:
    repo = local_repository(tmp_path / "repo")
    at_tag = recipe_with({"git": {"repo": str(repo), "tag": "v1", "path": "examples"}})
    packed = cli_sources.pack_source("r.json", resolve_recipe(at_tag), say=print, cache=tmp_path / "cache")
    assert packed is not None and packed.sha256 == sourcedir.pack(make_source(tmp_path / "same")).sha256
    head = recipe_with({"git": {"repo": str(repo), "branch": "main", "path": "examples"}})
    moved = cli_sources.pack_source("r.json", resolve_recipe(head), say=print, cache=tmp_path / "cache")
    assert moved is not None and moved.sha256 != packed.sha256
    commit = git(repo, "rev-parse", "HEAD~1").strip()
    pinned = recipe_with({"git": {"repo": str(repo), "commit": commit, "path": "examples"}})
    again = cli_sources.pack_source("r.json", resolve_recipe(pinned), say=print, cache=tmp_path / "cache")
    assert again is not None and again.sha256 == packed.sha256
    with pytest.raises(
        HfpipeError,
        match=r"source\.git\.tag: 'v9' is not a tag of .*repo; accepted: its "
        r"branches \['main'\] or tags \['v1'\]",
    ):
        missing = recipe_with({"git": {"repo": str(repo), "tag": "v9"}})
        cli_sources.pack_source("r.json", resolve_recipe(missing), say=print, cache=tmp_path / "cache")


def test_a_dir_source_is_next_to_the_recipe_and_holds_the_entry_point(tmp_path: Path) -> None:
    make_source(tmp_path / "scripts")
    (tmp_path / "scripts" / ".env").write_text("HF_TOKEN=secret\n")
    (tmp_path / "scripts" / "__pycache__").mkdir()
    ref = str(tmp_path / "my-recipe.json")
    said: list[str] = []
    packed = cli_sources.pack_source(ref, resolve_recipe(recipe_with({"dir": "scripts"})), say=said.append)
    assert packed is not None and "train.py" in packed.files
    # What the command's packing leaves out is said, each with why (every command packs through it).
    assert said == [
        "not packed: .env (looks like a secret; list it in training.source.include)",
        "not packed: __pycache__/ (Python's bytecode cache)",
        # and what is packed, before any upload
        "training source: 3 files, 21 B (173 B packed); largest: train.py (15 B), lib/util.py (6 B), "
        "requirements.txt (0 B)",
    ]
    with pytest.raises(
        HfpipeError, match=r"entry_point: 'other\.py' is not a file in .*scripts'; accepted: one of"
    ):
        cli_sources.pack_source(ref, resolve_recipe(recipe_with({"dir": "scripts"}, "other.py")), say=print)
    with pytest.raises(HfpipeError, match=r"source\.dir: .*nowhere' is not a folder"):
        cli_sources.pack_source(ref, resolve_recipe(recipe_with({"dir": "nowhere"})), say=print)


def _pack_calls(path: Path) -> set[str]:
    """The functions of a module that call hfpipe.core.recipe.sourcedir's `pack` (as `sourcedir.pack` or `pack`)."""
    import ast

    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Call):
                f = child.func
                by_module = (
                    isinstance(f, ast.Attribute) and f.attr == "pack" and ast.unparse(f.value) == "sourcedir"
                )
                if by_module or (isinstance(f, ast.Name) and f.id == "pack"):
                    found.add(function)
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_a_command_packs_a_source_only_through_the_function_that_names_what_it_leaves_out() -> None:
    """No packing path can stay silent: a recipe's source is packed by `hfpipe.cli.recipe.sources.pack_source` alone
    (start, its dry run and local all call it, and it names each skip through its required `say`); the only
    other caller is the project's own training_code/ asset, packed at synth time (no recipe, no include)."""
    root = Path(__file__).resolve().parents[2]
    layers = ("hfpipe", "lambda", "stacks")
    modules = [root / "app.py", *(p for layer in layers for p in sorted((root / layer).rglob("*.py")))]
    callers = {f"{path.relative_to(root)}:{function}" for path in modules for function in _pack_calls(path)}
    assert callers == {
        "hfpipe/cli/recipe/sources.py:pack_source",
        "stacks/constructs/source_asset.py:tarball_bytes",
    }


# --- upload once per hash, and the Plan's checks ------------------------------------------------------------


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    for var, value in (
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
    ):
        monkeypatch.setenv(var, value)
    with mock_aws():
        client = boto3.client("s3", region_name="eu-west-1")
        for bucket in (ARTIFACTS, "someone-elses"):
            client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        yield client


def test_upload_happens_once_per_content_hash(tmp_path: Path, s3: Any) -> None:
    packed = sourcedir.pack(make_source(tmp_path / "src"))
    uri, uploaded = cli_sources.upload(s3, ARTIFACTS, packed)
    assert (uri, uploaded) == (f"s3://{ARTIFACTS}/{contract.source_key(packed.sha256)}", True)
    assert cli_sources.upload(s3, ARTIFACTS, packed) == (uri, False)
    body = s3.get_object(Bucket=ARTIFACTS, Key=contract.source_key(packed.sha256))["Body"].read()
    assert body == packed.data
    with pytest.raises(HfpipeError, match=r"looking for s3://no-such-bucket/sources/.* failed: NoSuchBucket"):
        cli_sources.upload(s3, "no-such-bucket", packed)


def plan(recipe: dict[str, Any], s3: Any) -> Any:
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    quota = QuotaTable(default_quotas()).client("eu-west-1")
    return build_plan({"recipe": recipe}, "own-1", dev_config(), quota, s3=s3)


def test_plan_runs_the_uploaded_source_and_refuses_any_other(tmp_path: Path, s3: Any) -> None:
    packed = sourcedir.pack(make_source(tmp_path / "src"))
    uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
    planned = plan(recipe_with({"s3": uri, "sha256": packed.sha256}), s3)
    hps = planned.training_job_request["HyperParameters"]
    assert hps["sagemaker_submit_directory"] == f'"{uri}"' and hps["sagemaker_program"] == '"train.py"'
    s3.put_object(Bucket="someone-elses", Key=contract.source_key(packed.sha256), Body=packed.data)
    refusals = {
        f"s3://someone-elses/{contract.source_key(packed.sha256)}": r"source\.s3: .* is outside this environment",
        f"s3://{ARTIFACTS}/models/sourcedir.tar.gz": r"outside this environment's sources; accepted: a URI under",
        f"s3://{ARTIFACTS}/{contract.source_key('b' * 64)}": r"source\.s3: .* does not exist",
    }
    for where, message in refusals.items():
        with pytest.raises(RecipeError, match=message):
            plan(recipe_with({"s3": where, "sha256": packed.sha256}), s3)
    with pytest.raises(RecipeError, match=rf"source\.sha256: .* has sha256 {packed.sha256}, not {'c' * 64}"):
        plan(recipe_with({"s3": uri, "sha256": "c" * 64}), s3)
    with pytest.raises(RecipeError, match=r"entry_point: 'other\.py' is not a file in s3://"):
        plan(recipe_with({"s3": uri, "sha256": packed.sha256}, "other.py"), s3)
    with pytest.raises(
        RecipeError, match=r"source\.dir: a dir source is packed and uploaded by `hfpipe start`"
    ):
        plan(recipe_with({"dir": "scripts"}), s3)


def test_plan_checks_the_hyperparameters_against_the_uploaded_scripts_parser(tmp_path: Path, s3: Any) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', type=int)\np.parse_args()\n"
    )
    packed = sourcedir.pack(folder)
    assert (
        cli_sources.check_source(accept({"recipe": recipe_with({"dir": "src"}, epochs=2)}), packed).notes
        == ()
    )
    with pytest.raises(
        HfpipeError, match=r"^recipe\.training\.hyperparameters\.num_epochs: not an argument"
    ) as err:
        # refused before the upload
        cli_sources.check_source(accept({"recipe": recipe_with({"dir": "src"}, num_epochs=2)}), packed)
    assert str(err.value).endswith("did you mean epochs? accepted: its one argument, epochs")
    uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
    source = {"s3": uri, "sha256": packed.sha256}
    assert plan(recipe_with(source, epochs=2), s3).training_job_request["HyperParameters"]["epochs"] == "2"
    # An execution input written by hand (not through `hfpipe start`) meets the same rule in the Plan.
    with pytest.raises(
        RecipeError, match=r"hyperparameters\.epochs: 'two' is not accepted by train\.py's parser"
    ):
        plan(recipe_with(source, epochs="two"), s3)


def test_a_script_whose_parser_cannot_be_read_is_planned_and_reported_as_not_checked(
    tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan carries why the hyperparameters were not checked; the Report Lambda's report and the printed
    report (`hfpipe start --watch`, `hfpipe local`, `hfpipe report`) say it."""
    import io

    from rich.console import Console, Group

    from hfpipe.cli.run.report import render_report

    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\nargs, rest = p.parse_known_args()\n"
    )
    packed = sourcedir.pack(folder)
    uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
    planned = plan(recipe_with({"s3": uri, "sha256": packed.sha256}, epochs=2), s3)
    expected = (
        "training.hyperparameters were not checked against train.py's parser: it parses with parse_known_args, "
        "which takes arguments it does not declare; they are passed as the SDK passes them (--name value)"
    )
    assert planned.hyperparameters_not_checked == expected
    assert plan(load_recipe("tiny-qa"), s3).hyperparameters_not_checked is None  # the project's own script
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "lambda" / "pipeline"))
    from pipeline_lambdas.report import build_report

    report = build_report({"plan": planned.to_json(), "training": {"TrainingJobStatus": "Completed"}})
    assert report["hyperparameters_not_checked"] == expected
    console = Console(file=io.StringIO(), width=400, record=True, color_system=None)
    console.print(Group(*render_report(report)))
    [row] = [line for line in console.export_text().splitlines() if "hyperparameters" in line]
    assert row.split() == ["│", "hyperparameters", "│", *expected.split(), "│"]
    checked = {**report, "hyperparameters_not_checked": None}
    console.print(Group(*render_report(checked)))
    assert "were not checked" not in console.export_text()


# --- the originals (recipes/own-code/) -----------------------------------------------------------------------


def test_the_original_estimators_recipes_pack_check_and_plan_their_own_sources(
    tmp_path: Path, s3: Any
) -> None:
    import json

    # The recipe as written, its git URL pointed at a local repository (nothing downloaded).
    local_copy = squad_recipe_from(transformers_at_v461(tmp_path / "transformers"), tmp_path / "squad.json")
    squad = load_recipe(str(local_copy))
    spot = str(SPOT_RECIPE)
    for ref, recipe in ((str(local_copy), squad), (spot, load_recipe(spot))):
        resolved = resolve_recipe(recipe)
        packed = cli_sources.pack_source(ref, resolved, say=print, cache=tmp_path / "cache")
        assert packed is not None
        # every hyperparameter checked
        assert cli_sources.check_source(accept({"recipe": recipe}), packed).notes == (), ref
        uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
        recipe["training"]["source"] = {"s3": uri, "sha256": packed.sha256}
        hps = plan(recipe, s3).training_job_request["HyperParameters"]
        assert hps["sagemaker_program"] == json.dumps(resolved["training"]["entry_point"])
    assert hps["model_name"] == '"distilbert-base-uncased"'  # the spot recipe's, as its estimator sent it
    misspelled = {**squad, "training": {**squad["training"], "hyperparameters": {"max_seq_lenght": 384}}}
    with pytest.raises(RecipeError, match=r"max_seq_lenght: not an argument of run_qa\.py.*max_seq_length"):
        plan(misspelled, s3)


def test_the_environments_rules_that_do_not_read_the_source_run_before_it_is_packed(
    tmp_path: Path, s3: Any
) -> None:
    """`accept(..., source_later=True)`: the command's call before it packs a dir or git source. The image
    for the instance type (and the other rules that do not read the source) is checked then, in the line the
    Plan gives; the source's checks run once the uploaded archive is named; without the flag a dir source
    is still refused, as the Plan refuses it."""
    from hfpipe.core.run import plan as core_plan

    on_cpu = recipe_with({"dir": "src"})
    on_cpu["training"]["instance_type"] = "ml.m5.xlarge"
    with pytest.raises(RecipeError) as early:
        core_plan.accept({"recipe": on_cpu}, dev_config(), source_later=True)
    project = {**on_cpu, "training": {**on_cpu["training"], "source": None, "entry_point": "run_qa.py"}}
    with pytest.raises(RecipeError) as plans:
        core_plan.accept({"recipe": project}, dev_config())
    assert str(early.value) == str(plans.value) and "has no cpu image for ml.m5.xlarge" in str(early.value)

    before = core_plan.accept({"recipe": recipe_with({"dir": "src"})}, dev_config(), source_later=True)
    assert before.recipe_in_environment and not before.in_environment and before.training_image
    packed = sourcedir.pack(make_source(tmp_path / "src"))
    uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
    after = core_plan.accept(before.with_source(uri, packed.sha256), dev_config(), s3=s3)
    assert after.in_environment and after.training_image == before.training_image
    with pytest.raises(RecipeError, match=r"source\.sha256: .* has sha256"):
        core_plan.accept(before.with_source(uri, "c" * 64), dev_config(), s3=s3)
    with pytest.raises(
        RecipeError, match=r"source\.dir: a dir source is packed and uploaded by `hfpipe start`"
    ):
        core_plan.accept(before, dev_config(), s3=s3)


def test_the_command_and_the_plan_check_an_own_sources_arguments_once(
    tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hfpipe start`'s path: accepted without the environment, then with the packed archive, then planned in
    the environment with the uploaded one (the same sha256): the script's parser is read once. A hand-written
    input naming that archive is checked by the Plan itself."""
    from hfpipe.core.recipe import sources as core_sources
    from hfpipe.core.run import plan as core_plan

    calls: list[str] = []
    real = core_sources.arguments_note
    monkeypatch.setattr(
        core_sources, "arguments_note", lambda t, d, *n: calls.append(t["entry_point"]) or real(t, d, *n)
    )
    packed = sourcedir.pack(make_source(tmp_path / "src"))
    accepted = cli_sources.check_source(core_plan.accept({"recipe": recipe_with({"dir": "src"})}), packed)
    uri, _ = cli_sources.upload(s3, ARTIFACTS, packed)
    from hfpipe.local.engine.quotas import QuotaTable, default_quotas

    quota = QuotaTable(default_quotas()).client("eu-west-1")
    planned = core_plan.build_plan(
        accepted.with_source(uri, packed.sha256), "own-2", dev_config(), quota, s3=s3
    )
    assert planned.training_job_request["HyperParameters"]["sagemaker_submit_directory"] == f'"{uri}"'
    assert calls == ["train.py"]
    plan(recipe_with({"s3": uri, "sha256": packed.sha256}), s3)
    assert calls == ["train.py", "train.py"]
