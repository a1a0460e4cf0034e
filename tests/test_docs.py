"""Every command and snippet in README.md and docs/*.md runs as written.

Each page runs in a fresh temporary directory, its fenced blocks in page order:

- ```` ```sh ````: the block is one bash script (``set -e``, so every command must succeed),
  run in the page's directory with the kit's ``vta`` and ``python`` first on PATH;
- ```` ```python ````: the block runs in the page's one Python process (a page's snippets share
  their names, in order, as in one session), with the page's directory as working directory;
- ```` ```text ```` (usage synopses, sample output, grammars): not run. A fence without a
  language is an error, so a new command cannot escape the test by accident.

An HTML comment on the line(s) just before a fence changes how it runs (one scheme, read only
here):

- ``<!-- doc-test: file NAME -->``: the block is written to the file NAME in the page's
  directory (e.g. an assembler program that the next command reads); it runs nothing;
- ``<!-- doc-test: slow -->``: the block takes more than a minute; it runs in the page's slow
  test (``@pytest.mark.slow``), which runs the whole page, and is left out of the fast one
  (blocks that use its results are marked slow too);
- ``<!-- doc-test: skip REASON -->``: not run here, for the REASON given (a board, vendor
  tools, a run of hours, or a command that works only inside the repository's clone);
- ``<!-- doc-test: expect TEXT -->`` (any number): the block's output (stdout and stderr) must
  contain TEXT, for the facts a page shows as a command's output.

A page that drifts from the code (a renamed option, a moved function, a file it never made)
fails here with the block's line, its output and the error.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"^\s*<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
RUN_LANGS = {"sh", "python"}
FAST_TIMEOUT_S = 900  # a guard against a hang (a loaded machine is slow); slow: SLOW_TIMEOUT_S
SLOW_TIMEOUT_S = 3600


@dataclass
class Block:
    """One fenced block of a page, with the doc-test markers just before it."""

    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marks: dict[str, str] = field(default_factory=dict)
    expect: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return "skip" not in self.marks and (self.lang in RUN_LANGS or "file" in self.marks)


def parse_page(path: Path) -> list[Block]:
    """The fenced blocks of a markdown page with their markers; fails on a malformed marker."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        indent, lang = m.group(1), m.group(2)
        end = k + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[k + 1:end]]
        block = Block(path.name, k + 1, lang, "\n".join(body) + "\n")
        j = k - 1
        while j >= 0 and MARK.match(lines[j]):
            name, arg = MARK.match(lines[j]).groups()
            assert name in {"file", "slow", "skip", "expect"}, \
                f"{path.name}:{j + 1}: unknown doc-test marker {name!r}"
            if name == "expect":
                block.expect.append(arg)
            else:
                block.marks[name] = arg
            j -= 1
        blocks.append(block)
        k = end + 1
    return blocks


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["MPLBACKEND"] = "Agg"
    return env


WORKER = r"""
import json, sys, traceback
ns = {"__name__": "__main__"}
reply = sys.stdout
sys.stdout = sys.stderr
for line in sys.stdin:
    req = json.loads(line)
    try:
        exec(compile(req["code"], req["where"], "exec"), ns)
        res = {"ok": True}
    except BaseException:
        res = {"ok": False, "error": traceback.format_exc(limit=-3)}
    sys.stderr.flush()
    reply.write(json.dumps(res) + "\n")
    reply.flush()
"""


class PageSession:
    """A page's directory, its one Python process and the log of everything run."""

    def __init__(self, workdir: Path, logdir: Path) -> None:
        self.dir = workdir
        self.log = logdir / "python.log"
        self._log = self.log.open("w")
        self.py = subprocess.Popen(
            [sys.executable, "-c", WORKER], cwd=workdir, env=_env(), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)

    def close(self) -> None:
        if self.py.poll() is None:
            self.py.stdin.close()
            try:
                self.py.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.py.kill()
                self.py.wait()
        self._log.close()

    def _python_output(self, start: int) -> str:
        self._log.flush()
        with self.log.open() as f:
            f.seek(start)
            return f.read()

    def run(self, block: Block, timeout: float) -> str:
        """Run one block; returns its output, fails the test with it when the block fails."""
        if "file" in block.marks:
            (self.dir / block.marks["file"]).write_text(block.text)
            return ""
        if block.lang == "sh":
            try:
                r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text],
                                   cwd=self.dir, env=_env(), capture_output=True, text=True,
                                   timeout=timeout, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{block.where}: the sh block ran over {timeout:.0f} s "
                            "(mark it <!-- doc-test: slow -->?)", pytrace=False)
            out = r.stdout + r.stderr
            if r.returncode != 0:
                pytest.fail(f"{block.where}: the sh block failed (exit {r.returncode}):\n"
                            f"{block.text}\n--- output ---\n{out[-4000:]}", pytrace=False)
            return out
        start = self.log.stat().st_size
        self.py.stdin.write(json.dumps({"code": block.text, "where": block.where}) + "\n")
        self.py.stdin.flush()
        ready, _, _ = select.select([self.py.stdout], [], [], timeout)
        line = self.py.stdout.readline() if ready else ""
        out = self._python_output(start)
        if not line:
            pytest.fail(f"{block.where}: the python block did not finish within {timeout:.0f} s"
                        f" or its process died:\n{out[-4000:]}", pytrace=False)
        res = json.loads(line)
        if not res["ok"]:
            pytest.fail(f"{block.where}: the python block failed:\n{block.text}\n--- output ---\n"
                        f"{out[-3000:]}\n--- error ---\n{res['error']}", pytrace=False)
        return out


def run_page(path: Path, tmp_path: Path, *, slow: bool) -> None:
    """Run a page's blocks in order (the slow ones too when ``slow``)."""
    workdir = tmp_path / "page"
    workdir.mkdir()
    session = PageSession(workdir, tmp_path)
    try:
        for block in parse_page(path):
            if not block.runs or ("slow" in block.marks and not slow):
                continue
            out = session.run(block, SLOW_TIMEOUT_S if slow else FAST_TIMEOUT_S)
            for text in block.expect:
                assert text in out, \
                    f"{block.where}: the output does not say {text!r}:\n{out[-3000:]}"
    finally:
        session.close()


def _has_slow(path: Path) -> bool:
    return any("slow" in b.marks and b.runs for b in parse_page(path))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs(page: Path, tmp_path: Path) -> None:
    """The page's blocks, leaving out those marked slow, run and succeed in a fresh directory."""
    run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _has_slow(p)], ids=lambda p: p.name)
def test_page_runs_with_its_slow_blocks(page: Path, tmp_path: Path) -> None:
    """The whole page, its slow blocks included."""
    run_page(page, tmp_path, slow=True)


@pytest.mark.unit
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_fence_says_what_it_is(page: Path) -> None:
    """Every fence has a language; a skip gives its reason; a runnable page has commands."""
    for b in parse_page(page):
        assert b.lang or "file" in b.marks, (
            f"{b.where}: give the fence a language: sh (run), python (run) or text (not run)")
        assert "skip" not in b.marks or b.marks["skip"], f"{b.where}: say why it is skipped"
        assert not (b.expect and b.lang not in RUN_LANGS), \
            f"{b.where}: an expect marker belongs to a block that runs"


@pytest.mark.unit
def test_markers_parse(tmp_path: Path) -> None:
    """The scheme itself: markers attach to the next fence, in any number."""
    page = tmp_path / "p.md"
    page.write_text("x\n<!-- doc-test: file a.s -->\n```text\nfinish\n```\n\n"
                    "<!-- doc-test: slow -->\n<!-- doc-test: expect b -->\n"
                    "<!-- doc-test: expect c d -->\n```sh\nvta boards\n```\n"
                    "<!-- doc-test: skip a board -->\n```python\nimport pynq\n```\n```\nx\n```\n")
    a, b, c, d = parse_page(page)
    assert (a.marks, a.runs, a.text) == ({"file": "a.s"}, True, "finish\n")
    assert b.marks == {"slow": ""} and b.expect == ["c d", "b"] and b.runs
    assert c.marks == {"skip": "a board"} and not c.runs and c.line == 14
    assert d.lang == "" and not d.runs
