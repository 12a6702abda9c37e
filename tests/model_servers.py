"""A local model server for the tests: ModelServer on a free port serving a handler in a thread. Shared by
tests/cli/test_serve.py, test_serve_http.py, test_openai_endpoint.py and tests/kinds/test_request_contract_table.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hfpipe.local.serving.serve import ModelServer


@contextmanager
def serving(handler: Any, **kwargs: Any) -> Iterator[ModelServer]:
    """``handler`` served (``ModelServer.serve(handler, **kwargs)``) until the block ends, then shut down, its
    socket closed and its thread ended."""
    srv = ModelServer(port=0)
    thread = threading.Thread(target=srv.serve, args=(handler,), kwargs=kwargs)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)
        assert not thread.is_alive()
