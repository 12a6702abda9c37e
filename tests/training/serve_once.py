"""Answer one request through a model directory's code/inference.py, as the inference toolkit would.

Run by the tests under each Python environment whose transformers a container uses (stdlib + torch +
transformers only, nothing from this repository):

    python tests/training/serve_once.py MODEL_DIR '{"inputs": "..."}'

Prints one JSON line: {"transformers": version, "answer": decoded response}.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def main() -> None:
    model_dir, body = sys.argv[1], sys.argv[2]
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
    print(json.dumps({"transformers": transformers.__version__, "answer": json.loads(answer)}))


if __name__ == "__main__":
    main()
