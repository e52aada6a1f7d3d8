"""``kgb report RUN --html FILE``: one self-contained HTML file (no network: styles, script and
SVG plots inline) with the headline and paper tables, the plots and a transcript browser
filterable by model, method, problem and status (docs/reports.md, "HTML report").

Every text from the store is escaped; the only script is the filter and the ``#traj-N`` opener
below, inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from coordinator.report import RunReport
from coordinator.report_paper import PaperTable, paper_tables
from coordinator.report_plots import PLOTS
from coordinator.report_transcripts import Transcript, TurnView, VerdictView

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
figure{display:inline-block;margin:.5em;vertical-align:top}
figure svg{max-width:640px;height:auto}
pre{background:#f6f6f6;padding:6px;white-space:pre-wrap;max-height:30em;overflow:auto}
details.traj{border:1px solid #ddd;margin:4px 0;padding:4px}
.turn{border-left:3px solid #99c;margin:6px 0 6px 6px;padding-left:8px}
.PASSED{color:#070}.bad{color:#a00}
"""

_SCRIPT = """
function kgbFilter(){
  const f={};
  for(const s of document.querySelectorAll('#filters select')) f[s.name]=s.value;
  for(const d of document.querySelectorAll('details.traj')){
    d.hidden=!Object.keys(f).every(k=>!f[k]||d.dataset[k]===f[k]);
  }
}
function kgbOpen(){
  const d=location.hash&&document.querySelector(location.hash);
  if(d&&d.tagName==='DETAILS'){d.open=true;d.scrollIntoView();}
}
window.addEventListener('hashchange',kgbOpen);
document.addEventListener('DOMContentLoaded',()=>{kgbOpen();
  for(const s of document.querySelectorAll('#filters select')) s.addEventListener('change',kgbFilter);});
"""


def table_html(t: PaperTable, table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    return (f'<h3>{escape(t.title)}</h3><table id="{table_id}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def headline(report: RunReport) -> PaperTable:
    """The headline metrics as a plain table (the terminal's first table)."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def ci(c: tuple[float, float] | None, scale: float, unit: str) -> str:
        return "" if c is None else f" [{scale * c[0]:.2f}, {scale * c[1]:.2f}]{unit}"

    rows = tuple((m.model, m.method, m.source, m.platform, str(m.named), str(m.solved),
                  str(m.failed), str(m.unattempted), str(m.excluded), str(m.toolchain),
                  pct(m.accuracy) + ci(m.accuracy_ci, 100, "%"),
                  ("-" if m.speedup is None else f"{m.speedup:.2f}x") + ci(m.speedup_ci, 1, "x"),
                  *(pct(m.fast(p)) for p in (0.8, 1.0, 1.5, 2.0))) for m in report.metrics)
    return PaperTable("headline", "Accuracy over the named problems [95% CI], speed-up, fast_p",
                      ("model", "method", "source", "platform", "named", "solved", "failed",
                       "unattempted", "excluded", "toolchain", "accuracy", "speed-up",
                       "fast_0.8", "fast_1", "fast_1.5", "fast_2"), rows)


def funnel_table(report: RunReport) -> PaperTable:
    header = ("model", "method", *(s.label for s in report.funnel_total.stages), "excluded")
    rows = tuple((f.model, f.method, *(str(s.count) for s in f.stages), str(f.excluded))
                 for f in (*report.funnels, report.funnel_total))
    return PaperTable("funnel", "Status funnel (scored trajectories reaching each stage)", header, rows)


def _pre(label: str, text: str) -> str:
    return f"<div><b>{escape(label)}</b><pre>{escape(text)}</pre></div>" if text else ""


def _verdict(v: VerdictView | None, label: str) -> str:
    if v is None:
        return ""
    cls = "PASSED" if v.status == "PASSED" else "bad"
    items = "".join(f"<li>{escape(x)}</li>" for x in (*v.mismatches, *v.findings))
    spd = "" if v.speedup is None else f", speed-up {v.speedup:.2f}x"
    times = f"<div>timings: {escape('; '.join(v.timings))}</div>" if v.timings else ""
    return (f'<div class="verdict">{escape(label)}: <b class="{cls}">{escape(v.status)}</b>'
            f"{escape(spd)} {escape(v.message)}<ul>{items}</ul>{times}</div>")


def _turn(t: TurnView) -> str:
    calls = _pre("tool calls", "\n".join(t.tool_calls))
    return (f'<div class="turn"><b>turn {t.turn}</b> ({t.latency_s:.1f} s, {t.tokens:,} tokens)'
            f"{_pre('prompt (last message)', t.prompt)}{_pre('reply', t.reply)}{calls}"
            f"{_pre('extracted candidate', t.candidate)}{_verdict(t.verdict, 'its verdict')}</div>")


def transcript_html(i: int, t: Transcript) -> str:
    data = " ".join(f'data-{k}="{escape(v)}"' for k, v in (
        ("model", t.model), ("method", t.method), ("problem", t.problem), ("status", t.status)))
    return (f'<details class="traj" id="traj-{i}" {data}><summary>{escape(t.problem)} · '
            f"{escape(t.model)} · {escape(t.method)} · {escape(t.platform)} · "
            f"<b>{escape(t.status)}</b> (end {escape(t.end_reason)}, {len(t.turns)} turns)</summary>"
            f"{''.join(_turn(x) for x in t.turns)}{_verdict(t.final, 'final verdict')}"
            f"{_pre('final candidate', t.final_source)}</details>")


def _filters(ts: Sequence[Transcript]) -> str:
    out = []
    for name in ("model", "method", "problem", "status"):
        values = sorted({getattr(t, name) for t in ts})
        opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
        out.append(f'<label>{name} <select name="{name}"><option value="">all</option>{opts}'
                   "</select></label> ")
    return f'<div id="filters">{"".join(out)}</div>'


def render_html(report: RunReport, transcripts: Sequence[Transcript], total: int) -> str:
    """The whole page; ``total``: the run's trajectories (``transcripts`` may be a sample)."""
    tables = [table_html(headline(report), "t-headline"),
              *(table_html(t, f"t-{t.name}") for t in paper_tables(report)),
              table_html(funnel_table(report), "t-funnel")]
    plots = [f'<figure id="{pid}">{svg}<figcaption>{escape(cap)}</figcaption></figure>'
             for pid, cap, plot in PLOTS if (svg := plot(report)) is not None]
    state = f"<p><b>state {escape(report.state)}</b>: {escape(report.state_why)}</p>" \
        if report.state_why else ""
    scope = "" if report.scope.recorded else f"<p>denominator: {escape(report.scope.why)}</p>"
    shown = (f"<p>{len(transcripts)} of {total} trajectories shown"
             f"{' (evenly sampled to bound the file size)' if len(transcripts) < total else ''}.</p>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>kgb report {escape(report.run_id)}</title><style>{_STYLE}</style>"
            f"<script>{_SCRIPT}</script></head><body><h1>kgb report: run {escape(report.run_id)}</h1>"
            f'{state}{scope}<section id="tables"><h2>Tables</h2>{"".join(tables)}</section>'
            f'<section id="plots"><h2>Plots</h2>{"".join(plots)}</section>'
            f'<section id="transcripts"><h2>Transcripts</h2>{shown}{_filters(transcripts)}'
            f'{"".join(transcript_html(i, t) for i, t in enumerate(transcripts))}</section>'
            "</body></html>\n")
