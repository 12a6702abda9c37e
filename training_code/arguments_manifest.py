"""Print what each training script here accepts, as JSON: the field names of the dataclasses its parser reads
(`ARGUMENT_TYPES`: its own and transformers' TrainingArguments), under this environment's transformers.

    python training_code/arguments_manifest.py > hfpipe/kinds/arguments.json

The command (`hfpipe`) reads that file to refuse a misspelled hyperparameter before anything is created;
tests/kinds/test_arguments.py fails when it is stale. Imports nothing of hfpipe (this folder ships alone).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def manifest() -> dict[str, object]:
    """{"transformers": version, "entry_points": {script: [argument names]}} for every run_*.py here."""
    import transformers

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    scripts: dict[str, list[str]] = {}
    for path in sorted(HERE.glob("run_*.py")):
        spec = importlib.util.spec_from_file_location(f"_manifest_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        types = getattr(module, "ARGUMENT_TYPES", None)
        if types is None:
            raise SystemExit(f"{path.name}: no ARGUMENT_TYPES (the dataclasses its parser reads)")
        scripts[path.name] = sorted({f.name for t in types for f in dataclasses.fields(t) if f.init})
    return {"transformers": transformers.__version__, "entry_points": scripts}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")
