"""A recipe's `git` source, as the SageMaker Python SDK's `git_config` takes it, in a cache that is a cache.

The SDK (sagemaker/git_utils.py, `git_clone_repo`) clones `repo`, then runs `git checkout <branch>` and
`git checkout <commit>` (`_checkout_branch_and_commit`): `branch` may name a branch or a tag (checkout takes
either; in a fresh clone a tag comes before a remote branch of the same name, the default branch before
both), `commit` goes alone or after it. Its credentials (`_clone_command_for_github_like` and
`_clone_command_for_codecommit`): over https, `token` (alone with `2FA_enabled`), else `username` with
`password`, else git's own credential storage; over ssh none (it warns), with `ssh -oBatchMode=yes`; CodeCommit
takes no token and no 2FA. It never lets git prompt (`GIT_TERMINAL_PROMPT=0`).

Here the same choices are made, with three differences a reviewer can check: the secrets come from the
environment variables the recipe names (hfpipe.core.validate.git_source refuses a secret written in the
recipe) and reach git through a credential helper given on its command line, never in the URL, the argv or
the clone's config (the SDK writes them into the URL); ssh is never retried without BatchMode (the SDK's
retry can prompt); the clone is kept in a cache (`HFPIPE_CACHE`, default ~/.cache/hfpipe) between commands.

The cache: one folder per repository and ref, used under a lock (concurrent starts of one source wait for
each other), cloned into a side folder and renamed when complete (an interrupted clone is redone), fetched
again for a branch or tag (they move), and always checked out clean at the resolved commit (`checkout
--force` and `clean -ffdx`), so a checkout edited in place is never what is packed.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from hfpipe.cli.aws import HfpipeError
from hfpipe.core.recipe.typed import GitSource
from hfpipe.core.validate import environment_reference

FIELD = "recipe.training.source.git"
#: Written in a clone's .git once it is complete: a folder without it is an interrupted clone.
COMPLETE = "hfpipe-clone-complete"
#: The credential helper: answers git's `get` from the variables given to this git process only.
_HELPER = (
    "!f() { test \"$1\" = get && printf 'username=%s\\npassword=%s\\n' "
    '"$HFPIPE_GIT_USERNAME" "$HFPIPE_GIT_PASSWORD"; }; f'
)
_CREDENTIALS = re.compile(r"(https?://)[^/@\s]+@")
_KEEP_SCHEME = r"\1"


def repository(git: GitSource, base: Path) -> str:
    """The repository to clone: a URL as written, a local repository's path resolved from `base`."""
    repo = str(git["repo"])
    if "://" in repo or repo.startswith("git@"):
        return repo
    return str((base / Path(repo).expanduser()).resolve())


def _is_https(repo: str) -> bool:
    return repo.startswith(("https://", "http://"))


def credentials(git: GitSource, repo: str, say: Callable[[str], None]) -> tuple[str, str] | None:
    """(username, password) the SDK would send for this git_config, read from the environment; None where
    it sends none (git's own credential storage answers then, as for the SDK)."""
    given = [k for k in ("token", "username", "password") if k in git]
    codecommit = "git-codecommit." in repo
    if given and not _is_https(repo):
        say(f"note: {FIELD}: {given} ignored: the repository is not https (as the SDK, which warns so)")
        return None
    token = git.get("token") if not codecommit else None
    if codecommit and ("token" in git or "2FA_enabled" in git):
        say(f"note: {FIELD}: CodeCommit takes no token and no 2FA_enabled; ignored (as the SDK)")
    if token is not None:
        if "username" in git or "password" in git:
            say(f"note: {FIELD}: token given: username and password ignored (as the SDK)")
        return _from_environment("token", token), ""
    if git.get("2FA_enabled") is True and not codecommit:
        if given:
            say(f"note: {FIELD}: 2FA_enabled without a token: username and password ignored (as the SDK)")
        return None
    if "username" in git and "password" in git:
        username = str(git["username"])
        if environment_reference(username) is not None:
            username = _from_environment("username", username)
        return username, _from_environment("password", git["password"])
    if given:
        say(f"note: {FIELD}: {given} alone is ignored; accepted: both username and password (as the SDK)")
    return None


def _from_environment(key: str, reference: str) -> str:
    name = environment_reference(reference)
    value = os.environ.get(name or "")
    if not value or "\n" in value:
        raise HfpipeError(
            f"{FIELD}.{key}: {reference!r} names the environment variable {name}, which is "
            f"{'not set' if not value else 'more than one line'}; accepted: that variable set to the {key}"
        )
    return value


def git_environment(secret: tuple[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The `git -c ...` options and environment for every git this source runs: git never prompts (no
    terminal prompt, no askpass, ssh in batch mode), and the recipe's credentials, where it has any, are the
    only ones git uses, through the helper."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
    env["GIT_SSH_COMMAND"] = (os.environ.get("GIT_SSH_COMMAND") or "ssh") + " -oBatchMode=yes"
    options = ["-c", "core.askPass=", "-c", "advice.detachedHead=false"]
    if secret is not None:
        env.update({"HFPIPE_GIT_USERNAME": secret[0], "HFPIPE_GIT_PASSWORD": secret[1]})
        # An empty helper first clears the helpers of the user's configuration: the recipe's decide.
        options += ["-c", "credential.helper=", "-c", f"credential.helper={_HELPER}"]
    return options, env


class Git:
    """git in one clone, with the source's options and environment; an error names the field and git's
    own words (credentials taken out of them)."""

    def __init__(self, options: list[str], env: dict[str, str], folder: Path) -> None:
        self.options, self.env, self.folder = options, env, folder

    def run(self, what: str, *args: str, where: Path | None = None, check: bool = True) -> str:
        done = subprocess.run(
            ["git", *self.options, *args],
            cwd=where or self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != 0 and check:
            said = " / ".join(line.strip() for line in done.stderr.strip().splitlines()[-6:]) or "failed"
            # git's words in full (the last lines, not only the last one), any URL's credentials taken out.
            raise HfpipeError(f"{FIELD}: git {what} failed: {_CREDENTIALS.sub(_KEEP_SCHEME, said)}")
        return done.stdout if done.returncode == 0 else ""

    def commit_of(self, ref: str) -> str:
        return self.run(
            "rev-parse", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False
        ).strip()


@contextlib.contextmanager
def locked(path: Path, say: Callable[[str], None]) -> Iterator[None]:
    """An exclusive lock on `path` for the block; says once that it waits for another command."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another hfpipe command using the same checkout ({path.with_suffix('')})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def checkout(git: GitSource, cache: Path, base: Path, say: Callable[[str], None]) -> Iterator[Path]:
    """The clone at the git_config's commit, clean, in the cache; locked until the block ends (the caller
    packs it inside the block)."""
    repo = repository(git, base)
    refs = "\n".join(f"{k}={git[k]}" for k in ("branch", "tag", "commit") if k in git)
    folder = cache / "git" / hashlib.sha256(f"{repo}\n{refs}".encode()).hexdigest()[:16]
    folder.parent.mkdir(parents=True, exist_ok=True)
    options, env = git_environment(credentials(git, repo, say))
    with locked(folder.with_suffix(".lock"), say):
        runner = Git(options, env, folder)
        fresh = _cloned(runner, repo, folder)
        moving = "commit" not in git or "branch" in git or "tag" in git
        if not fresh and (moving or not runner.commit_of(git["commit"])):
            runner.run("fetch", "fetch", "--quiet", "--prune", "--force", "--tags", "origin")
        commit = resolve(runner, git, repo)
        runner.run("checkout", "checkout", "--quiet", "--force", "--detach", commit)
        runner.run("clean", "clean", "-ffdxq")
        _refuse_submodules(runner, commit, git.get("path", "."))
        yield folder


def _cloned(runner: Git, repo: str, folder: Path) -> bool:
    """Clone into `folder` unless a complete clone is there (an interrupted one is removed first); whether
    it cloned now."""
    if (folder / ".git" / COMPLETE).is_file():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    runner.run("clone", "clone", "--quiet", "--no-checkout", "--", repo, str(partial), where=folder.parent)
    (partial / ".git" / COMPLETE).write_text(repo + "\n")
    partial.rename(folder)
    return True


def resolve(runner: Git, git: GitSource, repo: str) -> str:
    """The commit the SDK's checkouts end at: `commit` when given (after checking `branch` exists, as its
    first checkout does), else `branch` as `git checkout <branch>` takes it in a fresh clone, else the
    remote's default branch."""
    name, key = (git["branch"], "branch") if "branch" in git else (git.get("tag"), "tag")
    at = ""
    if name is not None:
        default = runner.run(
            "symbolic-ref", "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", check=False
        )
        candidates = (
            [f"refs/tags/{name}"] if key == "tag" else [f"refs/tags/{name}", f"refs/remotes/origin/{name}"]
        )
        if key == "branch" and default.strip() == f"refs/remotes/origin/{name}":
            candidates.insert(0, default.strip())  # a local branch of that name: checkout's first choice
        at = next((c for c in (runner.commit_of(r) for r in candidates) if c), "")
        if not at:
            raise HfpipeError(_unknown_ref(runner, key, name, repo))
    if "commit" in git:
        commit = runner.commit_of(git["commit"])
        if not commit:
            raise HfpipeError(
                f"{FIELD}.commit: {git['commit']!r} is not a commit of {repo}; accepted: a commit it has "
                "(7 to 40 hex digits)"
            )
        return commit
    return at or runner.commit_of("refs/remotes/origin/HEAD") or runner.commit_of("HEAD")


def _unknown_ref(runner: Git, key: str, name: str, repo: str) -> str:
    listed = runner.run(
        "for-each-ref", "for-each-ref", "--format=%(refname)", "refs/tags", "refs/remotes/origin"
    )
    tags = sorted(r.removeprefix("refs/tags/") for r in listed.split() if r.startswith("refs/tags/"))
    branches = sorted(
        r.removeprefix("refs/remotes/origin/")
        for r in listed.split()
        if r.startswith("refs/remotes/origin/") and r != "refs/remotes/origin/HEAD"
    )
    known = tags if key == "tag" else branches + tags
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    what = "a tag" if key == "tag" else "a branch or a tag"
    return (
        f"{FIELD}.{key}: {name!r} is not {what} of {repo}; {hint}accepted: its branches {branches[:10]}"
        f" or tags {tags[-10:]}"
    )


def _refuse_submodules(runner: Git, commit: str, path: str) -> None:
    """A submodule under the packed folder is refused: the SDK's clone leaves it an empty folder, so the job
    would run without its files."""
    listed = runner.run("ls-tree", "ls-tree", "-r", "-z", commit, "--", path)
    modules = [e.split("\t", 1)[1] for e in listed.split("\0") if e.startswith("160000 ")]
    if modules:
        raise HfpipeError(
            f"{FIELD}.path: {path!r} holds the git submodule(s) {modules[:5]}, which the SDK's clone leaves "
            "empty (it does not fetch submodules), so they would be packed empty; accepted: a path without "
            "submodules (vendor their files into the repository, or point git.repo at the submodule itself)"
        )
