"""``kgb report --html``: one self-contained file with every table and plot and a transcript
browser; its structure checked fast, and the page itself in headless Chromium (slow)."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report_transcripts import read_transcripts, spread
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from protos.records import CaseResult, Finding, Status, Verdict, candidate_id
from tests.coordinator.test_report_paper import RUN, make_store

KERNEL = "import triton\n\ndef add_Tensor(a, b):\n    return a\n"
REPLY = f"Here it is <script>alert(1)</script>\n```python\n{KERNEL}```\n"
TABLES = ("t-headline", "t-multi-source", "t-multi-chip", "t-cost", "t-problems", "t-funnel")
PLOTS = ("plot-fast-p", "plot-funnel", "plot-accuracy-tokens", "plot-speedup", "plot-portability")


class _Page(HTMLParser):
    """Ids, tags with their attributes, and external references of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.external: list[str] = []
        self.svgs = 0
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids[str(a["id"])] = tag
        self.svgs += tag == "svg"
        for k in ("src", "href"):
            v = a.get(k) or ""
            if v and not v.startswith(("#", "data:")):
                self.external.append(v)
        if tag == "link":
            self.external.append(str(a))


def _store_with_a_transcript(tmp_path: Path) -> Path:
    store = make_store(tmp_path / RUN)
    prompt = Prompt((Message(Role.USER, "write aten::b <fast>"),), "aten/v1", "aten::b")
    store.add_llm_call(RUN, "aten::b@1/agent/m1/0", 1, LLMCall(
        "ep", "m1-id", prompt, CallStatus.OK, text=REPLY, usage=Usage(10, 20), latency_s=1.5))
    store.add_verdict(Verdict(
        Status.WRONG_ANSWER, "aten::b", 1, candidate_id(KERNEL), device_model="NVIDIA H100",
        harness_version="0.1.0", cases=(CaseResult("case_7", False, mismatch="max abs err 3.5"),),
        findings=(Finding("static", "torch-call", "torch.add at line 4"),)))
    store.close()
    return tmp_path / RUN / "kgb.sqlite"


def _write(db: Path, out: Path) -> str:
    r = CliRunner().invoke(kgb, ["report", RUN, "--store", str(db), "--html", str(out)])
    assert r.exit_code == 0, r.stderr
    return out.read_text()


def test_the_html_file_holds_every_table_plot_and_transcript_and_nothing_external(
        tmp_path: Path) -> None:
    page_text = _write(_store_with_a_transcript(tmp_path), tmp_path / "r.html")
    page = _Page()
    page.feed(page_text)
    assert all(page.ids.get(t) == "table" for t in TABLES)
    assert all(page.ids.get(p) == "figure" for p in PLOTS) and page.svgs >= len(PLOTS)
    assert page.external == [] and "<script src" not in page_text
    trajs = [a for tag, a in page.tags if tag == "details"]
    assert len(trajs) == 10                    # every trajectory: far under the size bound
    assert {a["data-status"] for a in trajs} == {"PASSED", "WRONG_ANSWER", "TOOLCHAIN_ERROR"}
    assert "10 of 10 trajectories shown" in page_text
    # the transcript of aten::b agent: reply (escaped), extracted candidate, its verdict
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page_text and "<script>alert" not in page_text
    assert "write aten::b &lt;fast&gt;" in page_text and "def add_Tensor(a, b):" in page_text
    assert "case_7: max abs err 3.5" in page_text and "static/torch-call: torch.add" in page_text
    for select in ("model", "method", "problem", "status"):
        assert f'<select name="{select}">' in page_text


def test_transcripts_are_sampled_evenly_under_the_size_bound(tmp_path: Path) -> None:
    from coordinator.store import Store
    db = _store_with_a_transcript(tmp_path)
    store = Store(db)
    results = store.trajectory_results(RUN)
    every = read_transcripts(store, results)
    some = read_transcripts(store, results, budget=250)
    store.close()
    assert len(every) == 10 and 1 <= len(some) < 10
    assert sum(t.size() for t in some) <= 250 or len(some) == 1
    assert spread(8) == [0, 4, 2, 6, 1, 3, 5, 7] and sorted(spread(10)) == list(range(10))


@pytest.mark.slow
def test_the_page_in_headless_chromium(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium (apt-get install -y chromium)")
    out = tmp_path / "r.html"
    _write(_store_with_a_transcript(tmp_path), out)
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([*flags, "--dump-dom", f"{out.as_uri()}#traj-2"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    page = _Page()
    page.feed(dom)
    assert all(page.ids.get(t) == "table" for t in TABLES)
    assert all(page.ids.get(p) == "figure" for p in PLOTS)
    opened = [a for tag, a in page.tags if tag == "details" and "open" in a]
    assert [a["id"] for a in opened] == ["traj-2"]          # the script opened the one named
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, "--window-size=1000,800", f"--screenshot={shot}", out.as_uri()],
                   capture_output=True, timeout=120, check=True)
    import numpy as np
    from matplotlib.image import imread
    pixels = imread(shot)[..., :3].reshape(-1, 3)
    colors = np.unique(pixels, axis=0)
    dark = float((pixels.mean(axis=1) < 0.5).mean())
    assert len(colors) > 50 and 0.005 < dark < 0.5           # text and tables, not a blank page
