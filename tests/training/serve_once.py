"""Answer one request through a model directory's code/inference.py, as the inference toolkit would.

Run by the tests under each Python environment whose transformers a container uses (stdlib + torch +
transformers only, nothing from this repository):

    python tests/training/serve_once.py MODEL_DIR '{"inputs": "..."}'
    python tests/training/serve_once.py --batch CASES.json    # [{"model_dir": ..., "body": ...}, ...]

Prints one JSON line per request: {"transformers": version, "answer": decoded response}, or {"transformers":
version, "error": traceback} in a batch, where each model's handler and its sibling modules are loaded anew
(torch and transformers once: starting them is most of a request's time).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def answer(model_dir: str, body: str) -> dict:
    spec = importlib.util.spec_from_file_location("inference", Path(model_dir) / "code" / "inference.py")
    assert spec is not None and spec.loader is not None
    handler = importlib.util.module_from_spec(spec)
    # The inference toolkit puts code/ on the path, so the handler's sibling modules import.
    sys.path.insert(0, str(Path(model_dir) / "code"))
    spec.loader.exec_module(handler)
    import transformers

    bundle = handler.model_fn(model_dir)
    # The toolkit's own JSON decoder/encoder stand in for input_fn/output_fn a handler leaves out.
    decode = getattr(handler, "input_fn", lambda b, content_type: json.loads(b))
    encode = getattr(handler, "output_fn", lambda p, accept: json.dumps(p))
    answer = encode(handler.predict_fn(decode(body, "application/json"), bundle), "application/json")
    return {"transformers": transformers.__version__, "answer": json.loads(answer)}


def main() -> None:
    if sys.argv[1] != "--batch":
        print(json.dumps(answer(sys.argv[1], sys.argv[2])))
        return
    import traceback

    import torch  # noqa: F401  (imported once, before the snapshot of what each handler adds)
    import transformers

    for case in json.loads(Path(sys.argv[2]).read_text()):
        path, modules = list(sys.path), set(sys.modules)
        try:
            print(json.dumps(answer(case["model_dir"], case["body"])), flush=True)
        except Exception:
            print(json.dumps({"transformers": transformers.__version__, "error": traceback.format_exc()}))
        finally:
            # The handler's own modules go (the next model's code/ has its own); what they imported from the
            # environment (transformers' lazily loaded parts) stays, as it would in one process.
            sys.path[:] = path
            code = str(Path(case["model_dir"]) / "code")
            for name in set(sys.modules) - modules:
                if str(getattr(sys.modules[name], "__file__", None) or "").startswith(code):
                    del sys.modules[name]


if __name__ == "__main__":
    main()
