"""``run_tool`` stopped early: the tool gets SIGTERM and time to clean up before SIGKILL, and
what it leaves in its temporary folder goes with the private TMPDIR it runs with."""

from __future__ import annotations

import re
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from vta.boards import tools

#: A stand-in for a YoWASP tool: it makes its ``yowasp_*`` folder in $TMPDIR, says "ready"
#: once its SIGTERM handler is in place, and on SIGTERM notes where its TMPDIR was and exits
#: without removing the folder (as a killed YoWASP leaves it).
TOOL = """
import os, pathlib, signal, sys, tempfile, threading
tempfile.mkdtemp(prefix="yowasp_")

def bye(*args):
    pathlib.Path("terminated").write_text(os.environ["TMPDIR"])
    os._exit(0)

signal.signal(signal.SIGTERM, bye)
pathlib.Path("pid").write_text(str(os.getpid()))
print("ready", flush=True)
threading.Event().wait()
"""


@pytest.mark.unit
def test_a_stopped_tool_gets_sigterm_and_leaves_no_temporary_folder(tmp_path: Path,
                                                                    monkeypatch) -> None:
    user_tmp = tmp_path / "tmp"
    user_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(user_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # (it caches the first TMPDIR it saw)
    (tmp_path / "tool.py").write_text(textwrap.dedent(TOOL))
    monkeypatch.setattr(tools, "tool_argv", lambda name: [sys.executable, "tool.py"])

    def interrupted(line: str) -> None:  # Ctrl-C once the tool is ready
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tools.run_tool("yosys", [], cwd=tmp_path, log=tmp_path / "tool.log",
                       progress=interrupted, watch=re.compile("ready"))
    private = Path((tmp_path / "terminated").read_text())  # SIGTERM came first
    assert private.parent == user_tmp and private.name.startswith("vta-tool-")
    assert list(user_tmp.iterdir()) == []  # its yowasp_* folder went with it
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists()  # reaped
