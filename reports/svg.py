"""SVG primitives for the report's charts (reports/charts.py): a figure of axes in pixels, each axes mapping
data to its box (linear or log), and rectangles, lines, points, ticks, titles and legends written as SVG text.

Everything is placed by arithmetic, nothing is measured: text widths are estimated from the character count
(:func:`text_width`), the margins are fixed per chart. Coordinates are computed with numpy and written with
one format over the arrays (a chart's hundreds of rectangles are one ``str.join``). Every text drawn comes
through :func:`esc`: project, user and job names come from the data.
"""

from __future__ import annotations

from html import escape

import numpy as np

FONT = "DejaVu Sans,Verdana,Arial,sans-serif"
PT = 96 / 72  # pixels a point: the sizes below are matplotlib's, in points, at its 96 dpi
INK = "#262626"


def esc(text) -> str:
    """Text for an SVG element or attribute: &, <, >, quotes escaped."""
    return escape(str(text), quote=True)


def text_width(text: str, size_pt: float) -> float:
    """Pixels a line of ``text`` takes at ``size_pt`` (an estimate: 0.6 em a character)."""
    return len(text) * size_pt * PT * 0.6


def _num(a) -> list[str]:
    """Pixel coordinates as short decimal strings (two places: a hundredth of a pixel)."""
    return [f"{v:.2f}".rstrip("0").rstrip(".") for v in np.asarray(a, float).ravel().tolist()]


def text(x: float, y: float, s, size_pt: float = 10, anchor: str = "middle", rotate: float = 0,
         baseline: str = "middle", weight: str | None = None, fill: str = INK) -> str:
    """One line of text at pixel (x, y); ``baseline`` middle, hanging or auto (the text's foot at y)."""
    rot = f' transform="rotate({rotate:g} {x:.2f} {y:.2f})"' if rotate else ""
    bold = f' font-weight="{weight}"' if weight else ""
    return (f'<text x="{x:.2f}" y="{y:.2f}" font-size="{size_pt * PT:.1f}" text-anchor="{anchor}" '
            f'dominant-baseline="{baseline}" fill="{fill}"{bold}{rot}>{esc(s)}</text>')


def nice_ticks(lo: float, hi: float, most: int = 8) -> np.ndarray:
    """Round tick values covering [lo, hi]: a step of 1, 2, 2.5 or 5 × 10^k, at most ``most`` ticks."""
    if not hi > lo:
        hi = lo + 1
    span = hi - lo
    for mult in (1, 2, 2.5, 5, 10):
        step = mult * 10 ** np.floor(np.log10(span / most))
        if span / step <= most - 1:
            break
    return np.arange(np.ceil(lo / step - 1e-9), np.floor(hi / step + 1e-9) + 1) * step + 0.0  # (no -0)


def tick_label(v: float) -> str:
    """A linear tick's label: an integer without its point, else as few digits as it needs."""
    v = 0.0 if abs(v) < 1e-12 else v  # never "-0"
    return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"


def log_decades(lo: float, hi: float) -> np.ndarray:
    """The powers of ten from the one at or below lo to the one at or above hi."""
    return 10.0 ** np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)


def legend_height(entries: int, size_pt: float = 10, ncol: int = 1) -> float:
    """The height in pixels of a legend of ``entries`` rows in ``ncol`` columns (Axes.legend), its frame's
    padding included; it sits 6 px inside the axes' edge."""
    fs = size_pt * PT
    return -(-entries // ncol) * fs * 1.4 + fs * 0.5


class Axes:
    """A plot box at pixels (left, top) of width × height, showing xlim × ylim (log10 where asked)."""

    def __init__(self, left: float, top: float, width: float, height: float, xlim, ylim,
                 xlog: bool = False, ylog: bool = False):
        self.left, self.top, self.width, self.height = left, top, width, height
        self.xlog, self.ylog = xlog, ylog
        self.xlim = tuple(np.log10(xlim)) if xlog else tuple(map(float, xlim))
        self.ylim = tuple(np.log10(ylim)) if ylog else tuple(map(float, ylim))
        self.parts: list[str] = []

    def x(self, v) -> np.ndarray:
        v = np.log10(np.asarray(v, float)) if self.xlog else np.asarray(v, float)
        lo, hi = self.xlim
        return self.left + (v - lo) / ((hi - lo) or 1) * self.width

    def y(self, v) -> np.ndarray:
        v = np.log10(np.asarray(v, float)) if self.ylog else np.asarray(v, float)
        lo, hi = self.ylim
        return self.top + self.height - (v - lo) / ((hi - lo) or 1) * self.height

    def rects(self, x0, x1, y0, y1, fill, opacity: float | None = None) -> None:
        """Rectangles [x0, x1] × [y0, y1] in data units; ``fill`` one colour or one a rectangle."""
        px0, px1, py0, py1 = self.x(x0), self.x(x1), self.y(y0), self.y(y1)
        xs, ys = np.minimum(px0, px1), np.minimum(py0, py1)
        ws, hs = np.abs(px1 - px0), np.abs(py1 - py0)
        cols = [_num(a) for a in (xs, ys, ws, hs)]
        op = f' fill-opacity="{opacity:g}"' if opacity is not None else ""
        if isinstance(fill, str):
            body = "".join(f'<rect x="{a}" y="{b}" width="{c}" height="{d}"/>' for a, b, c, d in zip(*cols))
            self.parts.append(f'<g fill="{fill}"{op} shape-rendering="crispEdges">{body}</g>')
        else:
            body = "".join(f'<rect x="{a}" y="{b}" width="{c}" height="{d}" fill="{f}"/>'
                           for a, b, c, d, f in zip(*cols, fill))
            self.parts.append(f'<g{op} shape-rendering="crispEdges">{body}</g>')  # (no seams between cells)

    def line(self, xs, ys, stroke: str, width: float = 1.5, dash: str | None = None, step: bool = False,
             marker: bool = False) -> None:
        """A polyline through the points (``step``: horizontal then vertical, each value held to the next)."""
        px, py = self.x(xs), self.y(ys)
        if step and len(px) > 1:  # matplotlib's where="post": (x0,y0) (x1,y0) (x1,y1) ...
            px, py = np.repeat(px, 2)[1:], np.repeat(py, 2)[:-1]
        pts = " ".join(f"{a},{b}" for a, b in zip(_num(px), _num(py)))
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="{width:g}"'
                          f' stroke-linejoin="round"{d}/>')
        if marker:
            self.points(xs, ys, 3, stroke)

    def points(self, xs, ys, radius: float, fill: str) -> None:
        cx, cy = _num(self.x(xs)), _num(self.y(ys))
        body = "".join(f'<circle cx="{a}" cy="{b}" r="{radius:g}"/>' for a, b in zip(cx, cy))
        self.parts.append(f'<g fill="{fill}">{body}</g>')

    def grid(self, xs=(), ys=()) -> None:
        """Light lines across the box at data values."""
        segs = [f"M{a} {self.top:.2f}V{self.top + self.height:.2f}" for a in _num(self.x(xs))]
        segs += [f"M{self.left:.2f} {b}H{self.left + self.width:.2f}" for b in _num(self.y(ys))]
        if segs:
            self.parts.append(f'<path d="{"".join(segs)}" stroke="#b0b0b0" stroke-opacity="0.5" stroke-width="0.8"/>')

    def xticks(self, at, labels, size_pt: float = 10, rotate: float = 0) -> None:
        """Tick marks below the box at data values ``at``, labelled (rotated labels end at their tick)."""
        px = self.x(at)
        keep = (px >= self.left - 0.5) & (px <= self.left + self.width + 0.5)
        px, labels = px[keep], [s for s, k in zip(labels, keep) if k]
        bottom = self.top + self.height
        self.parts.append(f'<path d="{"".join(f"M{a} {bottom:.2f}v3.5" for a in _num(px))}" stroke="{INK}"/>')
        for x, s in zip(px.tolist(), labels):
            if rotate:  # the label's end at its tick, the text running up to it from the lower left
                self.parts.append(text(x, bottom + 6, s, size_pt, "end", -rotate))
            else:
                self.parts.append(text(x, bottom + 6, s, size_pt, "middle", 0, "hanging"))

    def yticks(self, at, labels, size_pt: float = 10, right: bool = False) -> None:
        """Tick marks left of the box (or right of it) at data values ``at``, labelled."""
        py = self.y(at)
        keep = (py >= self.top - 0.5) & (py <= self.top + self.height + 0.5)
        py, labels = py[keep], [s for s, k in zip(labels, keep) if k]
        x, sign, anchor = (self.left + self.width, 1, "start") if right else (self.left, -1, "end")
        self.parts.append(f'<path d="{"".join(f"M{x:.2f} {b}h{3.5 * sign:g}" for b in _num(py))}" stroke="{INK}"/>')
        self.parts += [text(x + 6 * sign, y, s, size_pt, anchor) for y, s in zip(py.tolist(), labels)]

    def title(self, s: str, size_pt: float = 12) -> None:
        self.parts.append(text(self.left + self.width / 2, self.top - 6, s, size_pt, baseline="auto"))

    def xlabel(self, s: str, below: float = 30) -> None:
        self.parts.append(text(self.left + self.width / 2, self.top + self.height + below, s, 10, baseline="hanging"))

    def ylabel(self, s: str, left: float = 45) -> None:
        x, y = self.left - left, self.top + self.height / 2
        self.parts.append(text(x, y, s, 10, rotate=-90, baseline="auto"))

    def note(self, fx: float, fy: float, lines: list[str], size_pt: float = 7) -> None:
        """Lines of text from a point given as fractions of the box (0, 0: its lower left), left aligned."""
        x, y = self.left + fx * self.width, self.top + (1 - fy) * self.height
        step = size_pt * PT * 1.25
        for k, s in enumerate(lines):
            self.parts.append(text(x, y - (len(lines) - 1 - k) * step, s, size_pt, "start", baseline="auto"))

    def legend(self, entries: list[tuple[str, str, str]], corner: str, size_pt: float = 10, ncol: int = 1,
               frame: bool = True) -> None:
        """A legend in a corner of the box ("upper left", "lower right", "upper center", ...): entries of
        (label, kind, colour) where kind is "patch", "line", "--", ":", "-." (dashed lines), "dot" or
        "line+dot"; ``colour`` may carry an opacity after a space ("#2b6cb0 0.35")."""
        if not entries:
            return
        fs = size_pt * PT
        row_h, key_w = fs * 1.4, fs * 2
        nrow = -(-len(entries) // ncol)
        col_w = max(text_width(s, size_pt) for s, _, _ in entries) + key_w + fs * 1.2
        w, h = col_w * ncol + fs * 0.4, legend_height(len(entries), size_pt, ncol)
        vert, _, horiz = corner.partition(" ")
        x0 = {"left": self.left + 6, "right": self.left + self.width - 6 - w,
              "center": self.left + (self.width - w) / 2}[horiz or "center"]
        y0 = self.top + 6 if vert == "upper" else self.top + self.height - 6 - h
        out = []
        if frame:
            out.append(f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}" rx="3" fill="#fff" '
                       f'fill-opacity="0.8" stroke="#ccc"/>')
        for k, (label, kind, colour) in enumerate(entries):
            colour, _, alpha = colour.partition(" ")
            cx = x0 + fs * 0.4 + (k // nrow) * col_w
            cy = y0 + fs * 0.25 + (k % nrow + 0.5) * row_h
            op = f' fill-opacity="{alpha}"' if alpha else ""
            if kind == "patch":
                out.append(f'<rect x="{cx:.2f}" y="{cy - fs * 0.35:.2f}" width="{key_w:.2f}" height="{fs * 0.7:.2f}" '
                           f'fill="{colour}"{op}/>')
            if kind in ("line", "line+dot", "--", ":", "-."):
                dash = {"--": ' stroke-dasharray="5.5,2.4"', ":": ' stroke-dasharray="1.5,2.5"',
                        "-.": ' stroke-dasharray="9.6,2.4,1.5,2.4"'}.get(kind, "")
                out.append(f'<path d="M{cx:.2f} {cy:.2f}h{key_w:.2f}" stroke="{colour}" stroke-width="1.5"{dash}/>')
            if kind in ("dot", "line+dot"):
                out.append(f'<circle cx="{cx + key_w / 2:.2f}" cy="{cy:.2f}" r="3" fill="{colour}"/>')
            out.append(text(cx + key_w + fs * 0.5, cy, label, size_pt, "start"))
        self.parts.append("".join(out))

    def svg(self) -> str:
        """The axes' drawing, one group: its contents, the box's frame over them."""
        frame = (f'<rect x="{self.left:.2f}" y="{self.top:.2f}" width="{self.width:.2f}" height="{self.height:.2f}" '
                 f'fill="none" stroke="{INK}" stroke-width="0.8"/>')
        return f'<g class="axes">{"".join(self.parts)}{frame}</g>'



class Figure:
    """An SVG picture of width × height pixels holding axes and free parts (a colour bar)."""

    def __init__(self, width: float, height: float):
        self.width, self.height = round(width), round(height)
        self.axes: list[Axes] = []
        self.parts: list[str] = []

    def add(self, left: float, top: float, width: float, height: float, xlim, ylim, **log) -> Axes:
        ax = Axes(left, top, width, height, xlim, ylim, **log)
        self.axes.append(ax)
        return ax

    def svg(self, comment: str = "") -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" font-family="{FONT}">')
        note = f"<!--{comment}-->" if comment else ""
        body = "".join(ax.svg() for ax in self.axes) + "".join(self.parts)
        return f'{head}{note}<rect width="100%" height="100%" fill="#fff"/>{body}</svg>\n'
