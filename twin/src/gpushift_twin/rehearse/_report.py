"""The rehearsal as one self-contained HTML page (no network needed to view it).

The timeline chart is plotly's, with plotly.js inlined into the page
(``include_plotlyjs=True``); the card maps, runs and violations are plain HTML tables.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from gpushift_twin.rehearse._cards import Card
from gpushift_twin.rehearse._run import Rehearsal
from gpushift_twin.rehearse._sampler import Sample

_COLORS = {"dra": "#2a7ab0", "device-plugin": "#c0672b"}
_RESULT_COLORS = {"killed": "#b02a2a", "timeout": "#b02a2a", "failed": "#b02a2a", "skipped": "#999"}
_LEDGER_CLASS = {"device plugin": "dp", "DRA": "dra", "both": "both", "none": "none"}

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.ok { color: #1d7a38; font-weight: 600; } .bad { color: #b02a2a; font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ccc;
  padding: 3px 8px; text-align: left; vertical-align: top; } th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.maps { display: flex; gap: 24px; flex-wrap: wrap; } .map h3 { font-size: 15px; margin: 6px 0; }
td.dp { background: #fbe9dc; } td.dra { background: #dcebf6; } td.both { background: #f6c7c7; }
td.none { background: #eee; } .tenant { display: block; font-size: 12px; white-space: nowrap; }
.muted { color: #777; }
"""


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return (
        f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
    )


def _steps(samples: Sequence[Sample], end: float) -> tuple[list[float], list[Sample]]:
    xs = [s.t for s in samples]
    ys = list(samples)
    if samples and end > samples[-1].t:
        xs.append(end)
        ys.append(samples[-1])
    return xs, ys


def figure_html(rehearsal: Rehearsal) -> str:
    """The timeline chart as an HTML fragment with plotly.js inlined."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    scale = rehearsal.time_scale
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        row_heights=[0.37, 0.21, 0.21, 0.21],
        subplot_titles=(
            "Cutover steps",
            "GPU pods Running",
            "nvidia.com/gpu allocatable per node",
            "gpu.nvidia.com ResourceSlices per node",
        ),
    )
    for run in rehearsal.runs:
        spans = [s for s in run.spans if s.start is not None]
        fig.add_trace(
            go.Bar(
                name=f"to {run.to}",
                orientation="h",
                base=[s.start for s in spans],
                x=[max(s.seconds or 0.0, 0.05) for s in spans],
                y=[f"{run.to}: {s.name}" for s in spans],
                marker_color=[
                    _RESULT_COLORS.get(s.result, _COLORS.get(run.to, "#555")) for s in spans
                ],
                customdata=[
                    [
                        _fmt(s.seconds),
                        _fmt(None if s.seconds is None else s.seconds * scale),
                        s.result,
                        s.attempt,
                    ]
                    for s in spans
                ],
                hovertemplate=(
                    "%{y}<br>wall %{customdata[0]}, cluster %{customdata[1]}<br>"
                    "%{customdata[2]} (attempt %{customdata[3]})<extra></extra>"
                ),
            ),
            row=1,
            col=1,
        )
    samples = list(rehearsal.samples)
    xs, ys = _steps(samples, rehearsal.wall_seconds)
    fig.add_trace(
        go.Scatter(
            name="GPU pods Running",
            x=xs,
            y=[s.gpu_pods_running for s in ys],
            line_shape="hv",
            line_color="#333",
        ),
        row=2,
        col=1,
    )
    nodes = sorted(
        {n for s in samples for n, _ in s.allocatable} | {n for s in samples for n, _ in s.slices}
    )
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    for i, node in enumerate(nodes):
        # Nodes often move together; dashes keep coinciding lines apart.
        dash = dashes[i % len(dashes)]
        fig.add_trace(
            go.Scatter(
                name=f"{node} allocatable",
                legendgroup=node,
                x=xs,
                y=[dict(s.allocatable).get(node, 0) for s in ys],
                line_shape="hv",
                line_dash=dash,
            ),
            row=3,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                name=f"{node} slices",
                legendgroup=node,
                x=xs,
                y=[dict(s.slices).get(node, 0) for s in ys],
                line_shape="hv",
                line_dash=dash,
            ),
            row=4,
            col=1,
        )
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="wall seconds since the rehearsal started", row=4, col=1)
    fig.update_layout(
        height=260 + 26 * sum(len(r.spans) for r in rehearsal.runs) + 3 * 170,
        barmode="overlay",
        margin={"l": 220, "r": 20, "t": 40, "b": 50},
        legend={"orientation": "h", "y": -0.08},
        template="plotly_white",
    )
    out: str = fig.to_html(full_html=False, include_plotlyjs=True, config={"displaylogo": False})
    return out


def _map_table(title: str, cards: Sequence[Card]) -> str:
    if not cards:
        return (
            f'<div class="map"><h3>{html.escape(title)}</h3>'
            '<p class="muted">no cards read</p></div>'
        )
    width = max(c.index for c in cards) + 1
    rows = []
    by_node: dict[str, dict[int, Card]] = {}
    for c in cards:
        by_node.setdefault(c.node, {})[c.index] = c
    for node in sorted(by_node):
        cells = []
        for i in range(width):
            card = by_node[node].get(i)
            if card is None:
                cells.append('<td class="none"></td>')
                continue
            tenants = (
                "".join(f'<span class="tenant">{html.escape(t)}</span>' for t in card.tenants)
                or '<span class="tenant muted">idle</span>'
            )
            cells.append(
                f'<td class="{_LEDGER_CLASS.get(card.ledger, "none")}" '
                f'title="{html.escape(card.ledger)}"><b>{html.escape(card.ledger)}</b>{tenants}</td>'
            )
        rows.append(f"<tr><th>{html.escape(node)}</th>{''.join(cells)}</tr>")
    head = "".join(f"<th>gpu {i}</th>" for i in range(width))
    return (
        f'<div class="map"><h3>{html.escape(title)}</h3>'
        f"<table><tr><th>node</th>{head}</tr>{''.join(rows)}</table></div>"
    )


def _runs_table(rehearsal: Rehearsal) -> str:
    scale = rehearsal.time_scale
    rows = []
    for run in rehearsal.runs:
        for s in run.steps:
            rows.append(
                f"<tr><td>{html.escape(run.to)}</td><td>{html.escape(s['name'])}</td>"
                f'<td class="num">{_fmt(s["seconds"])}</td>'
                f'<td class="num">{_fmt(s["seconds"] * scale)}</td>'
                f"<td>{html.escape(s['result'])}</td></tr>"
            )
    return (
        "<table><tr><th>move to</th><th>step</th><th>wall</th><th>cluster</th><th>result</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _violations(rehearsal: Rehearsal) -> str:
    if not rehearsal.violations:
        return '<p class="ok">The invariant monitor recorded no violation over the whole run.</p>'
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(x))}</td>"
            for x in (
                v.get("reason"),
                v.get("node"),
                v.get("card"),
                v.get("firstSeen"),
                "active" if v.get("active") else f"resolved {v.get('resolved')}",
                v.get("message"),
            )
        )
        + "</tr>"
        for v in rehearsal.violations
    )
    return (
        f'<p class="bad">{len(rehearsal.violations)} invariant violations recorded.</p>'
        "<table><tr><th>reason</th><th>node</th><th>card</th><th>first seen (cluster)</th>"
        f"<th>state</th><th>message</th></tr>{rows}</table>"
    )


def render_report(rehearsal: Rehearsal) -> str:
    """The whole page."""
    verdict = (
        '<span class="ok">passed</span>' if rehearsal.ok else '<span class="bad">failed</span>'
    )
    runs = ", ".join(
        f"to {html.escape(r.to)}: {html.escape(r.result)}"
        + (f" (killed at {html.escape(r.killed_at)}, resumed)" if r.killed_at else "")
        for r in rehearsal.runs
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in rehearsal.notes)
    setup = "".join(f"<li>{html.escape(line)}</li>" for line in rehearsal.setup)
    maps = "".join(_map_table(title, cards) for title, cards in rehearsal.cards)
    started = rehearsal.wall_origin.strftime("%Y-%m-%d %H:%M:%S UTC")
    faults = ", ".join(f"{k} {v:g}" for k, v in rehearsal.faults.items() if v) or "none"
    if rehearsal.control_plane == "upstream":
        clock = "in real time on the upstream control plane (kube-apiserver and its kin)"
    else:
        cluster = _fmt(rehearsal.wall_seconds * rehearsal.time_scale)
        clock = f"at time-scale {rehearsal.time_scale:g} ({cluster} of cluster time)"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>gpushift rehearsal: {html.escape(rehearsal.subject)}</title>
<style>{_CSS}</style></head>
<body>
<h1>gpushift rehearsal: {html.escape(rehearsal.subject)} — {verdict}</h1>
<p>{runs}. Started {started}, {_fmt(rehearsal.wall_seconds)} wall {clock}.
Injected faults: {html.escape(faults)}.</p>
{f"<ul>{setup}</ul>" if setup else ""}
{f"<ul>{notes}</ul>" if notes else ""}
<h2>Invariant monitor</h2>
{_violations(rehearsal)}
<h2>Timeline</h2>
{figure_html(rehearsal)}
<h2>Cards before and after</h2>
<p class="muted">Each cell is one physical card: the ledger handing it out and the pods holding it
(device plugin: from dcgm-exporter's series; DRA: from the claims' allocations).</p>
<div class="maps">{maps}</div>
<h2>Steps</h2>
{_runs_table(rehearsal)}
</body></html>
"""


def write_report(rehearsal: Rehearsal, path: Path) -> Path:
    """Write the page atomically (a temporary file renamed into place); returns ``path``."""
    text = render_report(rehearsal)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
