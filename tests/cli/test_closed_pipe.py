"""A command whose reader stops reading (`hfpipe ... | head`, or a checker that fails to start, as CI's once
did) ends without a traceback, with the shell's status for a closed pipe."""

import os
import subprocess
import sys

import pytest

from hfpipe.cli import faults


@pytest.mark.parametrize(
    "argv", [["recipes", "list", "--json"], ["recipes", "list"]], ids=["json", "rich-table"]
)
def test_a_closed_pipe_is_no_traceback(argv):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from hfpipe.cli import main; sys.exit(main())",
            *argv,
        ],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141, (done.returncode, done.stderr)


def test_the_status_is_the_shells_for_sigpipe():
    def writes(_args):
        raise BrokenPipeError(32, "Broken pipe")

    assert faults.run(writes, None) == 128 + 13
