"""The prepared GPU run (benchmarks/gpu_run.sh runs it after installing the shipped wheels).

Steps, each in its own process with its own time cap, within one overall budget; results.json and
results.md in the output folder are rewritten after every step, so a run stopped at any point still returns
what it measured:

1. environment: Python, torch/CUDA, the GPU, where each pinned package was imported from (the private wheel
   folder, not the machine's own), and bitsandbytes' native library running an int8 and an NF4 layer;
2. fit: each recipe's own training script at full size under its instance's GPU memory (benchmarks/gpu_fit.py;
   on the GPU one process per recipe, for a clean CUDA context and peak-memory count each; in the --tiny
   rehearsal all four in one process, which imports torch and transformers once);
3. speed: benchmarks/gpu_lora.py's six LoRA settings on the bloomz-7b1 architecture, each loaded and warmed
   up under the recipe instance's 24 GiB (does it fit an A10G?), then timed without the cap: tokens/s, MFU,
   HFU against the original int8 + checkpointing + Adafactor measured in the same run.

Every measured figure is printed next to its analytic expectation (benchmarks/gpu_expect.py).

    python -m benchmarks.gpu_suite --out DIR [--budget 430]
    python -m benchmarks.gpu_suite --tiny --out DIR          # CPU rehearsal: tiny models, same steps

Over 400 lines on purpose: it is the one script the GPU run executes inside a short lease, every step
with its own time cap and partial results written as it goes; splitting it would spread that budget
logic over files the run must all carry.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import gpu_expect, gpu_fit, gpu_lora
from benchmarks.common import markdown_table

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
# Seconds each step may take at most (GPU / --tiny); the overall budget cuts them shorter when it runs out.
CAPS: dict[str, tuple[float, float]] = {
    "environment": (90, 60),
    "fit:distilbert-spot": (75, 60),
    "fit:bert-large-squad-ddp": (90, 60),
    "fit:roberta-large-mnli-mp": (90, 60),
    # Writes the 14 GB random checkpoint the speed step loads too, then loads it int8.
    "fit:bloomz-7b1-lora-samsum": (210, 90),
}
# Optimizer steps per fit run (GPU / --tiny): the first builds the optimizer state, the others are timed.
FIT_STEPS = (4, 2)
# Seconds the fit steps leave for the speed step (GPU / --tiny): they are cut short rather than it.
LORA_RESERVE = (180.0, 20.0)
# The LoRA recipe's instance: ml.g5.2xlarge, one A10G.
LORA_CAP_GIB = gpu_fit.instance_gpu("ml.g5.2xlarge")[1]
# gpu_lora settings in the order they run: the baseline first, then the likely fastest, so that a budget that
# runs out skips the least informative ones.
LORA_ORDER = ("original-int8-ckpt", "bf16-no-ckpt", "bf16-ckpt", "nf4-ckpt", "int8-no-ckpt", "nf4-no-ckpt")
PACKAGES = ("transformers", "peft", "accelerate", "bitsandbytes", "datasets", "tokenizers", "huggingface_hub")


# -------------------------------------------------------------------------------------- environment


def environment() -> dict[str, Any]:
    """What the run runs on; bitsandbytes exercised on the device (int8 and NF4 layers)."""
    import importlib
    import platform

    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "packages": {},
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / GIB, 2))
        env["bf16"] = torch.cuda.is_bf16_supported()
    for name in PACKAGES:
        try:
            mod = importlib.import_module(name)
            env["packages"][name] = {
                "version": getattr(mod, "__version__", "?"),
                "from": str(Path(mod.__file__ or "").parent),
            }
        except Exception as exc:
            env["packages"][name] = {"error": gpu_lora._error_text(exc)}
    env["bitsandbytes_check"] = _bnb_check()
    if torch.cuda.is_available():
        env["memory_cap_check"] = _cap_check()
        env["matmul_bf16_tflops"] = _matmul_tflops()
    return env


def _cap_check() -> dict[str, Any]:
    """The fit runs' mechanism, checked on this GPU: under a 1 GiB cap, 0.5 GiB allocates and 2 GiB raises
    torch.OutOfMemoryError (what a smaller GPU would do)."""
    import torch

    out: dict[str, Any] = {}
    try:
        gpu_lora.set_memory_cap(1.0, "cuda:0")
        small = torch.empty(2**29, dtype=torch.uint8, device="cuda:0")
        out["0.5 GiB under a 1 GiB cap"] = "allocated"
        del small
        try:
            big = torch.empty(2**31, dtype=torch.uint8, device="cuda:0")
            out["2 GiB under a 1 GiB cap"] = "allocated: THE CAP DOES NOT HOLD"
            del big
        except torch.OutOfMemoryError:
            out["2 GiB under a 1 GiB cap"] = "OutOfMemoryError"
    except Exception as exc:
        out["error"] = gpu_lora._error_text(exc)
    finally:
        gpu_lora.set_memory_cap(None, "cuda:0")
        torch.cuda.empty_cache()
    return out


def _matmul_tflops(n: int = 8192, repeats: int = 10) -> float:
    """bf16 n x n x n matrix products, TFLOP/s: the rate this GPU reaches in practice, beside its datasheet."""
    import torch

    a = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize()
    return round(2 * n**3 * repeats / (time.perf_counter() - t0) / 1e12, 1)


def _bnb_check() -> dict[str, Any]:
    """Load bitsandbytes' native library and run an int8 and an NF4 linear layer forward and backward."""
    out: dict[str, Any] = {}
    try:
        import bitsandbytes as bnb
        import torch

        lib = getattr(bnb.cextension, "lib", None)
        handle = getattr(lib, "_lib", None)
        out["native_library"] = Path(str(getattr(handle, "_name", type(lib).__name__))).name
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.randn(8, 64, device=device, dtype=torch.bfloat16, requires_grad=True)
        int8 = bnb.nn.Linear8bitLt(64, 64, has_fp16_weights=False, threshold=6.0).to(device)
        nf4 = bnb.nn.Linear4bit(64, 64, compute_dtype=torch.bfloat16, quant_type="nf4").to(device)
        for name, layer in (("int8", int8), ("nf4", nf4)):
            y = layer(x)
            y.float().sum().backward()
            out[name] = (
                "ok" if torch.isfinite(y.float()).all().item() and x.grad is not None else "not finite"
            )
            x.grad = None
    except Exception as exc:
        traceback.print_exc()
        out["error"] = gpu_lora._error_text(exc)
    return out


# ----------------------------------------------------------------------------------------- the run


class Suite:
    """Runs the steps in order within the budget and rewrites the results after each."""

    def __init__(
        self, out: Path, work: Path, tiny: bool, budget: float, install: dict[str, Any] | None
    ) -> None:
        self.out, self.work, self.tiny, self.budget = out, work, tiny, budget
        self.started = time.perf_counter()
        self.results: dict[str, Any] = {
            "tiny": tiny,
            "budget_seconds": budget,
            "install": install,
            "environment": None,
            "fit": [],
            "lora": None,
            "steps": [],
        }

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.started)

    def cap(self, step: str) -> float:
        gpu, tiny = CAPS[step]
        reserve = LORA_RESERVE[self.tiny] if step.startswith("fit:") else 0.0
        return max(0.0, min(tiny if self.tiny else gpu, self.left() - reserve))

    def record(self, step: str, t0: float, status: str, seconds: float | None = None) -> None:
        seconds = round(time.perf_counter() - t0, 2) if seconds is None else seconds
        self.results["steps"].append({"step": step, "seconds": seconds, "status": status})
        self.results["seconds"] = round(time.perf_counter() - self.started, 2)
        self.write()

    def write(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1, default=str) + "\n")
        (self.out / "results.md").write_text(safe_render(self.results) + "\n")

    def run(self) -> dict[str, Any]:
        steps: list[tuple[str, Any]] = [("environment", self.step_environment)]
        if self.tiny:
            steps.append(("fit", self.step_fits_together))
        else:
            steps += [(f"fit:{r}", lambda r=r: self.step_fit(r)) for r in gpu_fit.RECIPES]
        steps.append(("lora", self.step_lora))
        for name, step in steps:
            t0 = time.perf_counter()
            try:
                step()
            except Exception as exc:
                # A bug in one step must not cost the others their GPU time.
                traceback.print_exc()
                self.record(name, t0, f"error: {gpu_lora._error_text(exc)}")
        print(safe_render(self.results), flush=True)
        return self.results

    def _child(self, args: list[str], timeout: float) -> int | str:
        if timeout <= 1:
            return "skipped"
        return gpu_fit.run_process([sys.executable, *args], timeout)

    def step_environment(self) -> None:
        t0, path = time.perf_counter(), self.work / "environment.json"
        code = self._child(
            ["-m", "benchmarks.gpu_suite", "--environment", str(path)], self.cap("environment")
        )
        if path.exists():
            self.results["environment"] = json.loads(path.read_text())
        self.record("environment", t0, "ok" if code == 0 else str(code))

    def step_fit(self, recipe: str) -> None:
        t0, step = time.perf_counter(), f"fit:{recipe}"
        timeout = self.cap(step)
        if timeout <= 1:
            row: dict[str, Any] = {"recipe": recipe, "status": "skipped", "verdict": "skipped"}
            row["error"] = f"overall budget of {self.budget:.0f} s spent"
        else:
            row = gpu_fit.run_case(
                recipe, self.work, self.work / f"fit-{recipe}.json", FIT_STEPS[self.tiny], self.tiny, timeout
            )
        self.results["fit"].append(row)
        self.record(step, t0, str(row.get("status")))

    def step_fits_together(self) -> None:
        """The CPU rehearsal's fit runs, in one child process (gpu_fit.run_cases) under the sum of their caps:
        nothing here needs a clean CUDA context per recipe, and each child would import torch anew."""
        steps = [f"fit:{r}" for r in gpu_fit.RECIPES]
        timeout = min(sum(CAPS[s][1] for s in steps), self.left() - LORA_RESERVE[True])
        rows: list[dict[str, Any]]
        if timeout <= 1:
            error = f"overall budget of {self.budget:.0f} s spent"
            rows = [
                {"recipe": r, "status": "skipped", "verdict": "skipped", "error": error}
                for r in gpu_fit.RECIPES
            ]
        else:
            rows = gpu_fit.run_cases(list(gpu_fit.RECIPES), self.work, FIT_STEPS[True], True, timeout)
        self.results["fit"] += rows
        for step, row in zip(steps, rows, strict=True):
            self.record(
                step, time.perf_counter(), str(row.get("status")), float(row.get("wall_seconds", 0.0))
            )

    def step_lora(self) -> None:
        t0, path = time.perf_counter(), self.work / "lora.json"
        left = self.left()
        model_dir = self.work / "models" / ("bigscience--bloomz-7b1" + ("-tiny" if self.tiny else ""))
        args = [
            str(ROOT / "benchmarks" / "gpu_lora.py"),
            "--json-out",
            str(path),
            "--time-budget",
            f"{max(left - 15, 0):.0f}",
            "--memory-cap-gib",
            f"{LORA_CAP_GIB:g}",
            "--settings",
            ",".join(LORA_ORDER),
        ]
        if (model_dir / "config.json").exists():
            args += ["--model-dir", str(model_dir)]
        else:
            args += ["--workdir", str(self.work / "lora")]
        if self.tiny:
            args += ["--tiny", "--device", "cpu", "--block-size", "256", "--threads", "1", "--steps", "2"]
        else:
            args += ["--warmup-steps", "1", "--steps", "4", "--max-timed-seconds", "10"]
        code = self._child(args, left)
        self.results["lora"] = (
            json.loads(path.read_text()) if path.exists() else {"error": f"gpu_lora: {code}"}
        )
        self.record("lora", t0, "ok" if code == 0 else str(code))


# ------------------------------------------------------------------------------------------ output


def _gib(v: Any) -> str:
    return "" if v is None else f"{v:.2f}"


def fit_table(rows: list[dict[str, Any]]) -> str:
    headers = (
        "recipe",
        "instance (GPU)",
        "cap GiB",
        "batch x tokens",
        "verdict",
        "peak alloc GiB",
        "peak reserved GiB",
        "expected GiB",
        "measured / expected",
        "s/step",
        "error",
    )
    out = []
    for r in rows:
        exp = (r.get("expected") or {}).get("memory", {}).get("total")
        peak = r.get("peak_allocated_gib")
        steps = r.get("step_seconds") or []
        # The first step also builds the optimizer state and warms the kernels: time the others.
        timed = steps[1:] or steps
        shape = (r.get("batch_shapes") or [None])[0]
        out.append(
            [
                r.get("recipe"),
                f"{r.get('instance_type', '')} ({r.get('gpu', '')})",
                r.get("cap_gib"),
                "x".join(str(x) for x in shape) if shape else f"{r.get('batch', '')}x{r.get('seq_len', '')}",
                r.get("verdict"),
                _gib(peak),
                _gib(r.get("peak_reserved_gib")),
                _gib(exp / GIB if exp else None),
                f"{peak * GIB / exp:.2f}" if peak and exp else "",
                f"{sum(timed) / len(timed):.3f}" if timed else "",
                (r.get("error") or "")[:160],
            ]
        )
    return markdown_table(headers, out)


def lora_expectations(run: dict[str, Any], matmul_tflops: float | None = None) -> str:
    """Per LoRA setting: expected vs measured memory; tokens/s against the bound at 100 % of the datasheet bf16
    peak, and the model FLOP rate as a share of the bf16 matmul rate measured on this GPU in the same run."""
    headers = (
        "setting",
        "expected GiB",
        "capped peak GiB",
        "uncapped peak GiB",
        "measured / expected",
        "tokens/s at 100 % MFU",
        "tokens/s",
        "% of measured matmul rate",
    )
    peak_tflops = run.get("peak_bf16_tflops")
    rows = []
    config = gpu_lora.build_config(run.get("model", "").startswith("tiny")).to_dict()
    for r in run.get("rows", []):
        s = gpu_lora.SETTINGS_BY_NAME[r["setting"]]
        setting = gpu_expect.LoraSetting(s.quantization, s.checkpointing, s.optimizer, s.kbit_prepare)
        exp = gpu_expect.bloom_memory(config, setting, run["block_size"], gpu_lora.LORA["r"])["total"]
        fl = gpu_lora.flops_per_token(config, run["block_size"], gpu_lora.LORA["r"], s.checkpointing)
        measured = r.get("peak_mem_gib")
        rows.append(
            [
                r["setting"],
                _gib(exp / GIB),
                _gib(r.get("fit_peak_gib")),
                _gib(measured),
                f"{measured * GIB / exp:.2f}" if measured else "",
                f"{peak_tflops * 1e12 / fl['model']:.0f}" if peak_tflops else "",
                f"{r['tokens_per_s']:.0f}" if r.get("tokens_per_s") else "",
                f"{100 * r['tokens_per_s'] * fl['model'] / (matmul_tflops * 1e12):.1f}"
                if r.get("tokens_per_s") and matmul_tflops
                else "",
            ]
        )
    return markdown_table(headers, rows)


def safe_render(results: dict[str, Any]) -> str:
    """render(), or what went wrong in it: the JSON beside it keeps every figure either way."""
    try:
        return render(results)
    except Exception:
        return "# GPU run\n\nrendering failed; the figures are in results.json:\n\n" + traceback.format_exc()


def render(results: dict[str, Any]) -> str:
    lines = ["# GPU run" + (" (CPU rehearsal, tiny models)" if results.get("tiny") else ""), ""]
    env = results.get("environment") or {}
    if env:
        pk = ", ".join(f"{k} {v.get('version', v.get('error'))}" for k, v in env.get("packages", {}).items())
        lines += [
            f"Python {env.get('python')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
            f"GPU: {env.get('gpu', 'none')} {env.get('gpu_memory_gib', '')} GiB; {pk}; bitsandbytes: "
            f"{json.dumps(env.get('bitsandbytes_check'))}"
            + (
                f"; memory cap: {json.dumps(env['memory_cap_check'])}; bf16 matmul 8192^3: "
                f"{env.get('matmul_bf16_tflops')} TFLOP/s measured"
                if "memory_cap_check" in env
                else ""
            ),
            "",
        ]
    install = results.get("install") or {}
    if install:
        wheels = install.get("wheels", [])
        done = ", ".join(f"{w['name']} {w['version']}" for w in wheels if w.get("installable"))
        skipped = [f"{w['name']} ({w.get('reason')})" for w in wheels if not w.get("installable")]
        lines += [
            f"Wheels installed from {install.get('folder')}: {done}; not installable here: {skipped or 'none'}",
            "",
        ]
    lines += ["## Fit: each recipe's script, full-size architecture, GPU memory capped to its instance's", ""]
    lines += [fit_table(results.get("fit") or []), ""]
    lora = results.get("lora")
    if lora and lora.get("rows"):
        lines += [
            f"## Speed: LoRA settings, first loaded and warmed up under {LORA_CAP_GIB:g} GiB, then timed uncapped",
            "",
        ]
        lines += [
            gpu_lora.render(lora),
            "",
            "### Measured vs expected",
            "",
            lora_expectations(lora, env.get("matmul_bf16_tflops")),
            "",
        ]
    elif lora:
        lines += [f"## Speed: no result ({lora.get('error')})", ""]
    steps = ", ".join(f"{s['step']} {s['seconds']} s ({s['status']})" for s in results.get("steps", []))
    lines += [
        f"Steps: {steps}; total {results.get('seconds')} s of a {results.get('budget_seconds'):.0f} s budget."
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="folder for results.json and results.md")
    p.add_argument("--work", help="models, data and runs (default: <out>/../gpu-work, or a temporary folder)")
    p.add_argument("--tiny", action="store_true", help="CPU rehearsal with tiny models")
    p.add_argument("--budget", type=float, default=430.0, help="seconds for all steps together")
    p.add_argument(
        "--install-report", help="JSON of benchmarks/gpu_wheels.py report, recorded in the results"
    )
    p.add_argument("--environment", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.environment:
        Path(a.environment).write_text(json.dumps(environment(), indent=1))
        return 0
    if not a.out:
        p.error("--out is required")
    import tempfile

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    install = json.loads(Path(a.install_report).read_text()) if a.install_report else None
    with tempfile.TemporaryDirectory(prefix="gpu-run-") as tmp:
        work = Path(a.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = Suite(out, work, a.tiny, a.budget, install).run()
    fits_ok = all(r.get("status") in ("ok", "oom") for r in results["fit"])
    lora_ok = bool(results["lora"] and any(r.get("status") == "ok" for r in results["lora"].get("rows", [])))
    return 0 if fits_ok and lora_ok else 1


if __name__ == "__main__":
    sys.exit(main())
