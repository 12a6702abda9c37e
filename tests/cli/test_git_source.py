"""A recipe's git source as the SageMaker SDK's git_config takes it (hfpipe.cli.recipe.git_source): the commit its
checkouts end at (held against the SDK's own `_checkout_branch_and_commit` on a fresh clone), its credentials
from the environment through a credential helper (against a local HTTP server that asks for them), git never
prompting, and the cache: clean at a pinned commit, safe for concurrent starts, an interrupted clone redone.
Every repository is made here with `git init`; nothing is downloaded."""

from __future__ import annotations

import base64
import copy
import functools
import http.server
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from own_sources import git

from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.recipe import git_source
from hfpipe.cli.recipe import sources as cli_sources
from hfpipe.core.recipe.recipes import load_recipe, resolve_recipe


def recipe_with(source: Any, entry_point: str = "train.py") -> dict[str, Any]:
    recipe = copy.deepcopy(load_recipe("tiny-qa"))
    recipe["training"]["source"] = source
    recipe["training"]["entry_point"] = entry_point
    return recipe


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main (default): one, two; branch dev: three; tag v4.6.1 at one; 'both' a branch (at three) and a tag
    (at two), as transformers' v4.6.1 is a tag a recipe may give as `branch`."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch=main")
    commit(root, "src/train.py", "print('one')\n", "one")
    git(root, "tag", "v4.6.1")
    commit(root, "src/train.py", "print('two')\n", "two")
    git(root, "tag", "both")
    git(root, "checkout", "--quiet", "-b", "dev")
    commit(root, "src/train.py", "print('three')\n", "three")
    git(root, "branch", "both")
    git(root, "checkout", "--quiet", "main")
    return root


def packed_text(tmp_path: Path, source: dict[str, Any], cache: Path | None = None) -> str:
    """train.py's text as packed for a git source (through the command's one packing)."""
    from hfpipe.core.recipe import sourcedir

    packed = cli_sources.pack_source(
        str(tmp_path / "r.json"),
        resolve_recipe(recipe_with(source)),
        say=lambda _: None,
        cache=cache or tmp_path / "cache",
    )
    assert packed is not None
    return sourcedir.read_member(packed.data, "train.py").decode()


def sdk_checkout(repo: Path, where: Path, config: dict[str, str]) -> str:
    """The file the SDK's own checkouts leave: a fresh clone, then its `_checkout_branch_and_commit`."""
    from sagemaker import git_utils

    subprocess.run(["git", "clone", "--quiet", str(repo), str(where)], check=True)
    git_utils._checkout_branch_and_commit(config, where)
    return (where / "src" / "train.py").read_text()


@pytest.mark.parametrize(
    "refs",
    [
        {},
        {"branch": "main"},
        {"branch": "dev"},
        {"branch": "v4.6.1"},  # a tag given as branch: the SQuAD and MNLI estimators' git_config
        {"branch": "both"},  # a tag and a branch of one name: checkout takes the tag
        {"commit": "FIRST"},
        {"branch": "dev", "commit": "FIRST"},
    ],
    ids=["default", "main", "dev", "tag-as-branch", "tag-and-branch", "commit", "branch-and-commit"],
)
def test_the_checkout_is_the_one_the_sdks_git_config_makes(
    tmp_path: Path, repo: Path, refs: dict[str, str]
) -> None:
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    refs = {k: first if v == "FIRST" else v for k, v in refs.items()}
    expected = sdk_checkout(repo, tmp_path / "sdk", refs)
    assert packed_text(tmp_path, {"git": {"repo": str(repo), "path": "src", **refs}}) == expected


def test_a_ref_that_is_neither_is_refused_with_what_exists(tmp_path: Path, repo: Path) -> None:
    with pytest.raises(
        HfpipeError,
        match=r"^recipe\.training\.source\.git\.branch: 'v4\.6\.2' is not a branch or a tag of .*repo; did you "
        r"mean v4\.6\.1\? accepted: its branches \['both', 'dev', 'main'\] or tags \['both', 'v4\.6\.1'\]$",
    ):
        packed_text(tmp_path, {"git": {"repo": str(repo), "branch": "v4.6.2", "path": "src"}})


# --- the cache is a cache -------------------------------------------------------------------------------------


def test_a_pinned_checkout_edited_in_place_is_packed_as_committed(tmp_path: Path, repo: Path) -> None:
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    source = {"git": {"repo": str(repo), "commit": first, "path": "src"}}
    assert packed_text(tmp_path, source) == "print('one')\n"
    [clone] = [p for p in (tmp_path / "cache" / "git").iterdir() if p.is_dir()]
    (clone / "src" / "train.py").write_text("print('edited')\n")
    (clone / "src" / "extra.py").write_text("untracked\n")
    assert packed_text(tmp_path, source) == "print('one')\n"
    assert not (clone / "src" / "extra.py").exists()


def test_an_interrupted_clone_is_detected_and_redone(tmp_path: Path, repo: Path) -> None:
    source = {"git": {"repo": str(repo), "branch": "dev", "path": "src"}}
    assert packed_text(tmp_path, source) == "print('three')\n"
    [clone] = [p for p in (tmp_path / "cache" / "git").iterdir() if p.is_dir()]
    # what a clone killed half-way leaves: a repository with no objects and no completion mark
    shutil.rmtree(clone)
    subprocess.run(["git", "init", "--quiet", str(clone)], check=True)
    assert packed_text(tmp_path, source) == "print('three')\n"
    assert (clone / ".git" / git_source.COMPLETE).is_file()


def test_concurrent_starts_of_one_branch_source_wait_for_each_other(tmp_path: Path, repo: Path) -> None:
    source = {"git": {"repo": str(repo), "branch": "dev", "path": "src"}}
    with ThreadPoolExecutor(max_workers=6) as pool:
        texts = list(pool.map(lambda _: packed_text(tmp_path, source), range(12)))
    assert texts == ["print('three')\n"] * 12


def test_a_moved_branch_is_fetched_again(tmp_path: Path, repo: Path) -> None:
    source = {"git": {"repo": str(repo), "branch": "dev", "path": "src"}}
    assert packed_text(tmp_path, source) == "print('three')\n"
    git(repo, "checkout", "--quiet", "dev")
    commit(repo, "src/train.py", "print('four')\n", "four")
    assert packed_text(tmp_path, source) == "print('four')\n"


# --- what is packed from a clone ------------------------------------------------------------------------------


def test_a_path_that_is_a_committed_link_out_of_the_clone_is_refused(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n")
    (repo / "examples").symlink_to(home)
    git(repo, "add", "examples")
    git(repo, "commit", "--quiet", "-m", "link")
    with pytest.raises(
        HfpipeError,
        match=r"^recipe\.training\.source\.git\.path: 'examples': 'examples' is a symlink to '.*home', outside "
        r"the clone; accepted: a folder inside it, with no link out at any level$",
    ):
        packed_text(tmp_path, {"git": {"repo": str(repo), "branch": "main", "path": "examples"}})


def test_a_submodule_in_the_packed_folder_is_refused_with_a_clear_line(tmp_path: Path, repo: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "--quiet")
    commit(lib, "util.py", "X = 1\n", "lib")
    subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "submodule", "add", "--quiet", str(lib), "src/lib"],
        cwd=repo, check=True, capture_output=True,
        env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(repo), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    git(repo, "commit", "--quiet", "-m", "submodule")
    with pytest.raises(
        HfpipeError,
        match=r"^recipe\.training\.source\.git\.path: 'src' holds the git submodule\(s\) \['src/lib'\], which the "
        r"SDK's clone leaves empty",
    ):
        packed_text(tmp_path, {"git": {"repo": str(repo), "path": "src"}})


# --- credentials: the SDK's meaning, from the environment, git never prompting --------------------------------


class _AuthHandler(http.server.SimpleHTTPRequestHandler):
    """A dumb-HTTP git server that answers only requests carrying `expected` (Basic user:password)."""

    expected = ""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Basic {self.expected}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path, repo: Path) -> Iterator[tuple[str, type[_AuthHandler]]]:
    bare = tmp_path / "served" / "repo.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo), str(bare)], check=True)
    subprocess.run(["git", "update-server-info"], cwd=bare, check=True)
    handler = type("Handler", (_AuthHandler,), {})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(tmp_path / "served"))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/repo.git", handler
    server.shutdown()


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_a_token_from_the_environment_reaches_git_and_nowhere_else(
    tmp_path: Path, served: tuple[str, type[_AuthHandler]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = served
    handler.expected = basic("s3cr3t-token", "")  # the SDK's https://TOKEN@host: the token as the user
    monkeypatch.setenv("TEAM_GIT_TOKEN", "s3cr3t-token")
    source = {"git": {"repo": url, "branch": "v4.6.1", "path": "src", "token": "${TEAM_GIT_TOKEN}"}}
    assert packed_text(tmp_path, source) == "print('one')\n"
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert b"s3cr3t-token" not in path.read_bytes(), path


def test_username_and_password_from_the_environment(
    tmp_path: Path, served: tuple[str, type[_AuthHandler]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = served
    handler.expected = basic("team", "pa ss")
    monkeypatch.setenv("TEAM_GIT_PASSWORD", "pa ss")
    source = {"git": {"repo": url, "path": "src", "username": "team", "password": "$TEAM_GIT_PASSWORD"}}
    assert packed_text(tmp_path, source) == "print('two')\n"


def test_git_never_prompts_and_an_unset_variable_is_named(
    tmp_path: Path, served: tuple[str, type[_AuthHandler]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = served
    handler.expected = basic("team", "right")
    monkeypatch.delenv("TEAM_GIT_TOKEN", raising=False)
    with pytest.raises(HfpipeError, match=r"git\.token: '\$\{TEAM_GIT_TOKEN\}' names the environment variable "
                       r"TEAM_GIT_TOKEN, which is not set; accepted: that variable set to the token"):  # fmt: skip
        packed_text(tmp_path, {"git": {"repo": url, "token": "${TEAM_GIT_TOKEN}"}})
    started = time.monotonic()
    with pytest.raises(HfpipeError, match=r"^recipe\.training\.source\.git: git clone failed: .*terminal prompts "
                       r"disabled"):  # fmt: skip
        packed_text(tmp_path, {"git": {"repo": url}})  # no credentials: git would ask; it must not
    assert time.monotonic() - started < 30
