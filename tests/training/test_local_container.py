"""The local training container and endpoint: the SageMaker contracts the training scripts rely on."""

from __future__ import annotations

import json
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

from hfpipe.local.serving import endpoint as le
from hfpipe.local.training import container as lc

PROBE = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    out = {
        "argv": sys.argv[1:],
        "env": {k: v for k, v in os.environ.items() if k.startswith(("SM_", "SAGEMAKER_BASE"))},
        "rank": os.environ.get("RANK"),
        "world": os.environ.get("WORLD_SIZE"),
        "cwd_files": sorted(os.listdir(".")),
    }
    if os.environ.get("WORLD_SIZE"):
        import torch.distributed as dist
        dist.init_process_group("gloo")
        import torch
        t = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(t)
        out["allreduce"] = t.item()
        dist.destroy_process_group()
    model_dir = Path(os.environ["SM_MODEL_DIR"])
    rank = os.environ.get("RANK", "0")
    (model_dir / f"probe-{rank}.json").write_text(json.dumps(out))
    (model_dir / "code").mkdir(exist_ok=True)
    train = Path(os.environ["SM_CHANNEL_TRAINING"])
    (model_dir / "data-copy.txt").write_text((train / "data.txt").read_text())
    if os.environ.get("SM_HP_FAIL") == "true":
        raise SystemExit("asked to fail")
    """
)


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.py").write_text(PROBE)
    return src


@pytest.fixture
def train_channel(tmp_path: Path) -> Path:
    d = tmp_path / "train"
    d.mkdir()
    (d / "data.txt").write_text("hello\n")
    return d


def _probe(job: lc.LocalTrainingJob, rank: str = "0") -> dict:
    with tarfile.open(job.model_artifacts) as tar:
        member = tar.extractfile(f"probe-{rank}.json")
        assert member is not None
        return json.load(member)


def test_runs_script_under_the_container_contract(tmp_path, source_dir, train_channel):
    job = lc.run_training(
        tmp_path / "job",
        entry_point="probe.py",
        source_dir=source_dir,
        hyperparameters={"learning_rate": 0.5, "output_dir": "/opt/ml/checkpoints", "name": "x y"},
        channels={"training": train_channel},
    )
    assert job.status == "Completed", job.logs()
    probe = _probe(job)
    base = str(job.base_dir)
    # Hyperparameters arrive as HF-style command-line arguments; /opt/ml paths point into the local base dir.
    args = dict(zip(probe["argv"][::2], probe["argv"][1::2], strict=True))
    assert args == {"--learning_rate": "0.5", "--name": "x y", "--output_dir": f"{base}/checkpoints"}
    assert probe["env"]["SM_MODEL_DIR"] == f"{base}/model"
    assert probe["env"]["SM_CHANNEL_TRAINING"] == f"{base}/input/data/training"
    assert probe["env"]["SAGEMAKER_BASE_DIR"] == base
    assert json.loads(probe["env"]["SM_HPS"])["learning_rate"] == 0.5
    assert "probe.py" in probe["cwd_files"]
    with tarfile.open(job.model_artifacts) as tar:
        assert tar.extractfile("data-copy.txt").read() == b"hello\n"  # type: ignore[union-attr]
    assert (job.base_dir / "output" / "success").exists()


def test_failure_is_reported_with_the_scripts_error(tmp_path, source_dir, train_channel):
    job = lc.run_training(
        tmp_path / "job",
        entry_point="probe.py",
        source_dir=source_dir,
        hyperparameters={"fail": True},
        channels={"training": train_channel},
    )
    assert job.status == "Failed"
    assert job.model_artifacts is None
    assert "asked to fail" in (job.failure_reason or "") + job.logs()


def test_runs_a_create_training_job_request_from_a_sourcedir_tarball(tmp_path, source_dir, train_channel):
    tarball = tmp_path / "sourcedir.tar.gz"
    lc.pack_dir(source_dir, tarball)
    request = {
        "TrainingJobName": "hfpipe-dev-abc",
        "HyperParameters": {
            "epochs": "3",
            "sagemaker_program": '"probe.py"',
            "sagemaker_submit_directory": '"s3://bucket/sourcedir.tar.gz"',
            "sagemaker_region": '"eu-west-1"',
        },
        "InputDataConfig": [{"ChannelName": "training", "ContentType": "application/jsonlines"}],
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    job = lc.run_training_job_request(
        request, tmp_path / "job", channel_paths={"training": train_channel}, source_dir=tarball
    )
    assert job.status == "Completed", job.logs()
    assert job.job_name == "hfpipe-dev-abc"
    probe = _probe(job)
    assert probe["argv"] == ["--epochs", "3"]
    training_env = json.loads(probe["env"]["SM_TRAINING_ENV"])
    assert training_env["current_instance_type"] == "ml.g5.2xlarge"
    assert training_env["channel_input_dirs"] == {"training": f"{job.base_dir}/input/data/training"}
    config = json.loads((job.base_dir / "input/config/inputdataconfig.json").read_text())
    assert config["training"]["ContentType"] == "application/jsonlines"


def test_request_without_a_local_channel_is_refused(tmp_path, source_dir):
    request = {
        "HyperParameters": {"sagemaker_program": '"probe.py"'},
        "InputDataConfig": [{"ChannelName": "training"}],
    }
    with pytest.raises(lc.LocalContainerError, match="training"):
        lc.run_training_job_request(request, tmp_path / "job", channel_paths={}, source_dir=source_dir)


def test_smddp_request_is_refused_with_the_reason(tmp_path, source_dir, train_channel):
    request = {
        "HyperParameters": {
            "sagemaker_program": '"probe.py"',
            "sagemaker_distributed_dataparallel_enabled": "true",
        },
        "InputDataConfig": [{"ChannelName": "training"}],
    }
    with pytest.raises(lc.LocalContainerError, match="sagemaker_distributed_dataparallel_enabled"):
        lc.run_training_job_request(
            request, tmp_path / "job", channel_paths={"training": train_channel}, source_dir=source_dir
        )


@pytest.mark.slow
def test_torch_distributed_runs_two_gloo_processes(tmp_path, source_dir, train_channel):
    job = lc.run_training(
        tmp_path / "job",
        entry_point="probe.py",
        source_dir=source_dir,
        channels={"training": train_channel},
        distribution="torch_distributed",
        processes_per_host=2,
    )
    assert job.status == "Completed", job.logs()
    ranks = [_probe(job, r) for r in ("0", "1")]
    assert [p["world"] for p in ranks] == ["2", "2"]
    assert [p["allreduce"] for p in ranks] == [3.0, 3.0]  # 1 + 2 summed over both ranks
    assert "torchrun" in job.logs()


@pytest.mark.slow
def test_a_failing_torch_distributed_script_fails_the_job(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "boom.py").write_text("raise SystemExit('rank failed on purpose')\n")
    job = lc.run_training(
        tmp_path / "job",
        entry_point="boom.py",
        source_dir=src,
        distribution="torch_distributed",
        processes_per_host=2,
    )
    assert job.status == "Failed", job.logs()[-2000:]
    assert "Reporting training SUCCESS" not in job.logs()


def test_stop_is_delivered_as_the_real_container_delivers_it(tmp_path, train_channel):
    """StopTrainingJob / spot: SIGTERM goes to the container's PID 1 (a bash without a trap, which ignores
    it), the toolkit forwards nothing, and after the grace period everything is killed. A script's SIGTERM
    handler therefore never runs; the run is Stopped and only what it saved before counts."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "sleeper.py").write_text(
        "import os, signal, time, pathlib\n"
        "def bye(*_):\n"
        "    pathlib.Path(os.environ['SM_OUTPUT_DATA_DIR'], 'got-sigterm').write_text('1')\n"
        "    raise SystemExit(143)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "pathlib.Path(os.environ['SM_OUTPUT_DATA_DIR'], 'started').write_text('1')\n"
        "time.sleep(60)\n"
    )
    proc = lc.start_training(tmp_path / "job", entry_point="sleeper.py", source_dir=src)
    started = proc.base_dir / "output" / "data" / "started"
    import time

    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    begun = time.monotonic()
    proc.stop(grace_seconds=1.0)
    job = proc.wait()
    assert job.status == "Stopped"
    assert time.monotonic() - begun >= 1.0  # the grace period ran out; nothing ended the script earlier
    assert not (job.output_data_dir / "got-sigterm").exists()


def test_local_endpoint_serves_through_inference_py(tmp_path):
    model = tmp_path / "model"
    (model / "code").mkdir(parents=True)
    (model / "weights.json").write_text(json.dumps({"scale": 3}))
    (model / "code" / "inference.py").write_text(
        textwrap.dedent(
            """
            import json, os
            def model_fn(model_dir, context=None):
                return json.load(open(os.path.join(model_dir, "weights.json")))
            def predict_fn(data, model):
                return [{"generated_text": data["inputs"] * model["scale"]}]
            """
        )
    )
    tarball = lc.pack_dir(model, tmp_path / "model.tar.gz")
    with le.LocalEndpoint(tarball) as endpoint:
        assert endpoint.predict({"inputs": "ab"}) == [{"generated_text": "ababab"}]
        # The toolkit's default decoders: JSON, and CSV with a header row (a column of inputs).
        assert json.loads(endpoint.invoke("inputs\nxy\n", content_type="text/csv")) == [
            {"generated_text": ["xy", "xy", "xy"]}
        ]
        assert endpoint.invoke('{"inputs": "a"}', accept="text/csv") == b"generated_text\r\naaa\r\n"
        for content_type in ("text/plain", "application/x-npy"):
            with pytest.raises(lc.LocalContainerError, match="content_type"):
                endpoint.invoke(b"xy", content_type=content_type)


def test_local_endpoint_without_handler_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    with pytest.raises(lc.LocalContainerError, match=r"code/inference\.py"):
        le.LocalEndpoint(lc.pack_dir(model, tmp_path / "model.tar.gz"))


def write_wheel(folder: Path, name: str = "teampkg", version: str = "0.1") -> Path:
    """A pure-Python wheel made here (nothing downloaded), as a team's wheelhouse would hold it."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "ANSWER = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "".join(f"{p},,\n" for p in [*files, f"{info}/RECORD"]))
    return wheel


def test_requirements_get_a_cached_folder_of_their_own_offline(tmp_path, train_channel, monkeypatch):
    from hfpipe.local.training import requirements

    monkeypatch.setenv(requirements.CACHE_ENV, str(tmp_path / "cache"))
    src = tmp_path / "own"
    src.mkdir()
    (src / "train.py").write_text(
        "import os, teampkg\n"
        "open(os.path.join(os.environ['SM_MODEL_DIR'], 'answer.txt'), 'w').write(str(teampkg.ANSWER))\n"
    )
    # Empty, and satisfied by this environment (rich is installed): nothing is installed, nothing cached.
    (src / "requirements.txt").write_text("# none\n\n")
    assert requirements.package_folder(src) is None
    (src / "requirements.txt").write_text("rich\n")
    assert requirements.package_folder(src) is None and not (tmp_path / "cache").exists()
    # Not installed here and no wheel for it: refused offline, saying what to do.
    (src / "requirements.txt").write_text("teampkg==0.1\n")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(lc.LocalContainerError, match=r"local mode installs offline: .*PIP_FIND_LINKS"):
        lc.run_training(
            tmp_path / "job0", entry_point="train.py", source_dir=src, channels={"training": train_channel}
        )
    # From a wheelhouse: installed once into the hash's own folder, which the job imports from.
    write_wheel(tmp_path / "wheels")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    job = lc.run_training(
        tmp_path / "job1", entry_point="train.py", source_dir=src, channels={"training": train_channel}
    )
    assert job.status == "Completed", job.logs()
    with tarfile.open(job.model_artifacts) as tar:
        member = tar.extractfile("answer.txt")
        assert member is not None and member.read() == b"42"
    [folder] = [p for p in (tmp_path / "cache" / "requirements").iterdir() if p.is_dir()]
    assert (folder / "teampkg" / "__init__.py").is_file() and (folder / requirements.DONE).is_file()
    assert requirements.package_folder(src) == folder  # the second time: the cached folder, no pip
    # In the job, teampkg's metadata (the folder on its PYTHONPATH) met the line: the toolkit's pip left out.
    assert "requirements.txt (1 lines) already met by this environment" in job.logs()
    import importlib.util

    assert importlib.util.find_spec("teampkg") is None  # this environment itself is unchanged


def test_requirements_met_here_are_judged_from_the_installed_metadata(tmp_path, monkeypatch):
    from importlib import metadata

    from hfpipe.local.training import requirements

    rich = metadata.version("rich")
    assert requirements.met_here([f"rich=={rich}", 'nosuchpkg==1.0; python_version < "3"']) is True
    assert requirements.met_here([f"rich!={rich}"]) is False
    assert requirements.met_here(["nosuchpkg-hfpipe==1.0"]) is False
    for unsure in ("--index-url https://example.invalid/simple", "rich[jupyter]", "rich  # pinned"):
        assert requirements.met_here([unsure]) is None, unsure
    # Met from the metadata: no pip process at all; a line it cannot judge: pip's dry run decides.
    calls: list[tuple[str, ...]] = []

    def pip(*args: str) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, '{"install": []}', "")

    monkeypatch.setattr(requirements, "_pip", pip)
    assert requirements.met_here(["rich"]) is True
    assert requirements.package_folder(_source_with(tmp_path / "a", "rich\n")) is None and calls == []
    assert requirements.package_folder(_source_with(tmp_path / "b", "rich  # pinned\n")) is None
    assert [c[:2] for c in calls] == [("install", "--dry-run")]


def _source_with(folder: Path, text: str) -> Path:
    folder.mkdir()
    (folder / "requirements.txt").write_text(text)
    return folder


def test_the_toolkits_install_is_left_out_only_when_every_line_is_met(
    tmp_path, monkeypatch, capsys, in_process_training
):
    from sagemaker_training import modules

    original = modules.install_requirements
    monkeypatch.setattr(modules, "install_requirements", original)
    (tmp_path / "requirements.txt").write_text("rich  # pinned\n")  # not judged here: pip as before
    lc._skip_install_when_met(str(tmp_path))
    assert modules.install_requirements is original and capsys.readouterr().out == ""
    (tmp_path / "requirements.txt").write_text("nosuchpkg-hfpipe==1.0\n")  # not met: pip as before
    lc._skip_install_when_met(str(tmp_path))
    assert modules.install_requirements is original
    (tmp_path / "requirements.txt").write_text("# the project's\nrich\n")
    lc._skip_install_when_met(str(tmp_path))
    assert modules.install_requirements is not original
    modules.install_requirements(str(tmp_path), True)
    assert "requirements.txt (1 lines) already met by this environment" in capsys.readouterr().out


def test_requirements_r_lines_are_resolved_in_the_source(tmp_path, monkeypatch):
    """pip reads `-r other.txt` relative to the file that names it, which the toolkit runs from the source's
    root: the lines it names are judged and installed from there (a folder or a sourcedir.tar.gz), never from
    a copy that lacks them."""
    from hfpipe.core.recipe import sourcedir
    from hfpipe.local.training import requirements

    monkeypatch.setenv(requirements.CACHE_ENV, str(tmp_path / "cache"))
    src = tmp_path / "own"
    (src / "reqs").mkdir(parents=True)
    (src / "train.py").write_text("print('train')\n")
    (src / "requirements.txt").write_text("-r reqs/base.txt\n-c reqs/pins.txt\n")
    (src / "reqs" / "base.txt").write_text("rich\n--requirement more.txt\n")
    (src / "reqs" / "more.txt").write_text("packaging\n")
    (src / "reqs" / "pins.txt").write_text("nosuchpkg-hfpipe==1.0\n")  # a constraint asks for nothing
    assert requirements.meaningful_lines(src) == ["rich", "packaging"]
    assert requirements.package_folder(src) is None
    archive = tmp_path / "sourcedir.tar.gz"
    archive.write_bytes(sourcedir.pack(src).data)
    assert requirements.meaningful_lines(archive) == ["rich", "packaging"]
    assert requirements.package_folder(archive) is None
    (src / "requirements.txt").write_text("-r ../outside.txt\n")
    with pytest.raises(requirements.RequirementsError, match=r"'\.\./outside\.txt' is outside the source"):
        requirements.package_folder(src)
    (src / "requirements.txt").write_text("-r missing.txt\n")
    with pytest.raises(
        requirements.RequirementsError, match=r"'missing\.txt', named by a -r or -c line, is not"
    ):
        requirements.package_folder(src)
