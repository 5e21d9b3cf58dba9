"""Server-rendered SVG charts: no JavaScript, no CDN, readable without the console's CSS.

Every label is escaped; numbers are formatted here. Each chart carries a <title> and
`role="img"` with an aria-label so it reads as one image with a name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

ACTION_COLOURS = {
    "correct": "#2e7d32",
    "ambiguous": "#f9a825",
    "incorrect": "#c62828",
    "failed": "#6d4c41",
    "pending": "#90a4ae",
}
LINE_COLOURS = ("#1565c0", "#c62828", "#6a1b9a", "#2e7d32")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP, RIGHT = 720, 220, 44, 28, 12, 12


def _svg(body: list[str], title: str, width: int = WIDTH, height: int = HEIGHT) -> Markup:
    label = escape(title)
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{label}" xmlns="http://www.w3.org/2000/svg"><title>{label}</title>' + "".join(body) + "</svg>"
    )


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    for step in (
        1,
        2,
        4,
        6,
        10,
        20,
        40,
        60,
        100,
        200,
        400,
        600,
        1000,
        2000,
        4000,
        6000,
        10000,
        20000,
        40000,
        60000,
        100000,
    ):
        if value <= step:
            return float(step)
    return float(value)


def _axes(body: list[str], y_max: float, fmt: str, days: Sequence[str]) -> tuple[float, float]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    for fraction in (0, 0.5, 1):
        y = TOP + plot_h * (1 - fraction)
        body.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        body.append(
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
            f"{escape(fmt.format(y_max * fraction))}</text>"
        )
    if days:
        step = max(1, len(days) // 6)
        slot = plot_w / len(days)
        for index in range(0, len(days), step):
            x = LEFT + slot * (index + 0.5)
            body.append(
                f'<text x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle" font-size="11">'
                f"{escape(days[index][5:])}</text>"
            )
    return plot_w, plot_h


def stacked_bars(days: Sequence[str], series: Mapping[str, Sequence[int]], title: str) -> Markup:
    """One bar per day, stacked by series (e.g. questions per action)."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(days))]
    y_max = _nice_max(max(totals, default=0))
    body: list[str] = []
    plot_w, plot_h = _axes(body, y_max, "{:.0f}", days)
    slot = plot_w / max(len(days), 1)
    for index, day in enumerate(days):
        y = TOP + plot_h
        for name, values in series.items():
            count = values[index]
            if not count:
                continue
            height = plot_h * count / y_max
            y -= height
            body.append(
                f'<rect class="bar bar-{escape(name)}" x="{LEFT + slot * index + slot * 0.15:.1f}" y="{y:.1f}" '
                f'width="{slot * 0.7:.1f}" height="{height:.1f}" fill="{ACTION_COLOURS.get(name, "#546e7a")}">'
                f"<title>{escape(day)} {escape(name)}: {count}</title></rect>"
            )
    return _svg(body, title)


def line_chart(
    days: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    title: str,
    fmt: str = "{:.0f}",
    y_max: float | None = None,
) -> Markup:
    """One line per series; a None value breaks the line (no data that day)."""
    values = [v for line in series.values() for v in line if v is not None]
    y_max = y_max if y_max is not None else _nice_max(max(values, default=0))
    body: list[str] = []
    plot_w, plot_h = _axes(body, y_max, fmt, days)
    slot = plot_w / max(len(days), 1)
    for (name, line), colour in zip(series.items(), LINE_COLOURS):
        points: list[str] = []
        for index, value in enumerate(line):
            if value is None:
                continue
            x, y = LEFT + slot * (index + 0.5), TOP + plot_h * (1 - min(value, y_max) / y_max)
            points.append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                f"<title>{escape(days[index])} {escape(name)}: {escape(fmt.format(value))}</title></circle>"
            )
        if len(points) > 1:
            body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="2"/>')
    return _svg(body, title)


def score_axis(
    scores: Sequence[Mapping[str, Any]],  # the logged candidates, as stored in JSON
    upper: float | None,
    lower: float | None,
    title: str = "evaluator scores and thresholds",
) -> Markup:
    """Every candidate's score as a dot on one axis, with the upper/lower thresholds drawn on it."""
    numbers = [float(s.get("score", 0.0) or 0.0) for s in scores]
    marks = [v for v in (upper, lower) if v is not None]
    low = min([-1.0, *numbers, *marks])
    high = max([1.0, *numbers, *marks])
    width, height, pad = WIDTH, 110, 30
    span = (high - low) or 1.0

    def x(value: float) -> float:
        return pad + (width - 2 * pad) * (value - low) / span

    body = [f'<line x1="{pad}" x2="{width - pad}" y1="60" y2="60" stroke="#888"/>']
    for tick in (low, (low + high) / 2, high):
        body.append(f'<text x="{x(tick):.1f}" y="100" text-anchor="middle" font-size="11">{tick:.2f}</text>')
    for name, value, colour in (("lower", lower, "#c62828"), ("upper", upper, "#2e7d32")):
        if value is None:
            continue
        body.append(
            f'<line class="threshold threshold-{name}" x1="{x(value):.1f}" x2="{x(value):.1f}" y1="18" y2="84" '
            f'stroke="{colour}" stroke-dasharray="4 3" stroke-width="2"><title>{name} threshold {value:.3f}</title></line>'
        )
        body.append(
            f'<text x="{x(value):.1f}" y="13" text-anchor="middle" font-size="11" fill="{colour}">'
            f"{name} {value:.2f}</text>"
        )
    for index, (score, value) in enumerate(zip(scores, numbers)):
        origin = str(score.get("origin", "kb"))
        colour = "#1565c0" if origin == "kb" else "#ef6c00"
        y = 60 + ((index % 5) - 2) * 6  # spread overlapping dots a little
        label = f"{value:.3f} · {origin} · {score.get('document', '')} {score.get('section', '') or ''}".strip()
        body.append(
            f'<circle class="score score-{escape(origin)}" cx="{x(value):.1f}" cy="{y}" r="5" fill="{colour}" '
            f'fill-opacity="0.75"><title>{escape(label)}</title></circle>'
        )
    return _svg(body, title, width, height)
