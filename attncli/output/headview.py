"""The head view: queries in a column on the left, keys on the right, a line
from each query to each key as thick as the weight (the picture bertviz made
known), as a standalone page — one file, inline script and style, nothing
fetched, no framework: a layer and head selector, hover or click a token to
see only its lines and its numbers — and as a static SVG of a few heads.

The page holds the weights exactly (float32, base64) and draws them in the
browser; the static SVG is drawn here with the same geometry (GEOMETRY)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from html import escape
from typing import Any

from attncli.output.maps import AttentionMaps

# Sizes in pixels, shared by the page's script and the static SVG.
GEOMETRY = {
    "row": 22,  # one token per row
    "font": 13,  # token font size (monospace: a character is 0.6 of it)
    "top": 34,  # room above the first token (column titles)
    "gap": 220,  # between the two columns of tokens, where the lines run
    "pad": 6,  # between a token and its lines
    "maxStroke": 8,  # the width of a line of weight 1
    "minWeight": 0.001,  # lighter lines are not drawn (a hundredth of a pixel would not show)
}
CHAR = 0.6  # a monospace character's width, in font sizes
MAX_SVG_HEADS = 4  # --svg draws the head view of at most this many heads (side by side)
MAX_WEIGHTS = 4_000_000  # weights a page holds at most (16 MB of float32); past that a line per pair is no picture

# Tableau 10 and two more: a colour per head, distinct on white.
HEAD_COLOURS = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#8c564b",
]
FONTS = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", Arial, sans-serif'
MONO = 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace'


EXPLORE_TOKENS = 64  # queries and keys the page recomputes weights for (their scores go in the page)


@dataclass(frozen=True)
class Explore:
    """What the page needs to recompute one head's weights and outputs for another
    temperature and scale: logits = scores · scale / temperature + bias, forbidden
    pairs −∞, softmax, weights · V. Only for attention with no soft-cap, ALiBi or sinks."""

    scores: Any  # [n_q, n_k] q·k (or cosine) before the scale
    values: Any  # [n_k, d_v]
    columns: list[str]  # V's column names
    scale: float
    temperature: float
    scale_text: str  # how the scale was chosen: "1/√3", "given"
    allowed: Any = None  # [n_q, n_k] bool, None: every pair
    bias: Any = None  # [n_q, n_k] added after scaling (finite where allowed), None: none

    def data(self) -> dict[str, Any]:
        import numpy as np

        n_q, n_k = np.shape(self.scores)
        allowed = None if self.allowed is None else np.broadcast_to(self.allowed, (n_q, n_k))
        bias = None
        if self.bias is not None:
            bias = np.broadcast_to(np.asarray(self.bias, dtype=float), (n_q, n_k))
            bias = np.where(np.isfinite(bias), bias, 0.0)
        return {
            "scores": np.asarray(self.scores, dtype=float).tolist(),
            "values": np.asarray(self.values, dtype=float).tolist(),
            "columns": self.columns,
            "scale": self.scale,
            "temperature": self.temperature,
            "scaleText": self.scale_text,
            "allowed": None if allowed is None else allowed.tolist(),
            "bias": None if bias is None else bias.tolist(),
        }


def head_colour(i: int) -> str:
    """The colour of head ``i``: Tableau's ten and two more, then evenly spaced hues."""
    return HEAD_COLOURS[i] if i < len(HEAD_COLOURS) else f"hsl({(i * 137) % 360}, 55%, 45%)"


def text_width(labels: list[str]) -> float:
    return max([len(label) for label in labels] + [4]) * CHAR * GEOMETRY["font"]


def page_data(maps: AttentionMaps) -> dict[str, Any]:
    """What the page's script reads: names, shape, geometry, colours, and the
    weights [layers, heads, n_q, n_k] as little-endian float32 in base64
    (forbidden pairs as NaN: they get no line, and the numbers leave them out)."""
    import numpy as np

    w = np.asarray(maps.weights, dtype="<f4")
    if maps.allowed is not None:
        w = np.where(maps.allowed, w, np.float32(np.nan))
    return {
        "title": maps.title,
        "queries": maps.queries,
        "keys": maps.keys,
        "layers": maps.layers,
        "heads": maps.heads,
        "layerAxis": maps.layer_axis,
        "shape": list(w.shape),
        "geometry": GEOMETRY,
        "colours": [head_colour(i) for i in range(len(maps.heads))],
        "weights": base64.b64encode(np.ascontiguousarray(w).tobytes()).decode("ascii"),
        "explore": None if maps.explore is None else maps.explore.data(),
    }


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element (no '</script>', no '<!--')."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(maps: AttentionMaps, title: str, terminal: str | None = None) -> str:
    """The standalone head view page, titled ``title`` (the command) and headed by
    the maps' own title; ``terminal`` is the terminal view as HTML, shown below it."""
    below = (
        ""
        if terminal is None
        else ('<section class="terminal"><h2>The same run in the terminal</h2>' + terminal + "</section>")
    )
    return PAGE.format(
        title=escape(title),
        heading=escape(maps.title or title),
        data=script_json(page_data(maps)),
        style=STYLE,
        script=SCRIPT,
        terminal=below,
    )


def static_svg(maps: AttentionMaps, title: str) -> tuple[str, float, float]:
    """The head view of every head in ``maps`` side by side (at most MAX_SVG_HEADS):
    (SVG elements, width, height), to be placed in a picture."""
    g = GEOMETRY
    left, right = text_width(maps.queries), text_width(maps.keys)
    panel = left + g["gap"] + right + 2 * g["pad"]
    rows = max(len(maps.queries), len(maps.keys))
    height = 28 + g["top"] + rows * g["row"] + 40
    parts = [f'<text x="0" y="18" class="hv-title">{escape(title)}</text>']
    for n, (name, weights, allowed) in enumerate(list(maps.panels())[:MAX_SVG_HEADS]):
        x0, y0 = n * (panel + 40), 28
        colour = head_colour(n % len(maps.heads))  # as the page colours this head
        parts.append(f'<g transform="translate({x0:.1f},{y0})">')
        parts.append(f'<text x="0" y="14" class="hv-head" fill="{colour}">{escape(name)}</text>')
        x_left, x_right = left, left + 2 * g["pad"] + g["gap"]
        for i, token in enumerate(maps.queries):
            parts.append(
                f'<text x="{x_left:.1f}" y="{_y(i) + 4:.1f}" class="hv-token" text-anchor="end">{escape(token)}</text>'
            )
        for j, token in enumerate(maps.keys):
            parts.append(f'<text x="{x_right:.1f}" y="{_y(j) + 4:.1f}" class="hv-token">{escape(token)}</text>')
        for i in range(len(maps.queries)):
            for j in range(len(maps.keys)):
                w = float(weights[i, j])
                if w < g["minWeight"] or (allowed is not None and not allowed[i, j]):
                    continue
                parts.append(
                    f'<line x1="{x_left + g["pad"]:.1f}" y1="{_y(i):.1f}" x2="{x_right - g["pad"]:.1f}" '
                    f'y2="{_y(j):.1f}" stroke="{colour}" stroke-width="{w * g["maxStroke"]:.3f}" '
                    f'stroke-opacity="0.75"><title>{escape(maps.queries[i])} → '
                    f"{escape(maps.keys[j])}: {w:.4f}</title></line>"
                )
        parts.append("</g>")
    shown = min(maps.count, MAX_SVG_HEADS)
    key_y = height - 14
    parts.append(f'<text x="0" y="{key_y}" class="hv-note">line width = weight: </text>')
    for n, w in enumerate((0.1, 0.5, 1.0)):
        x = 140 + n * 90
        parts.append(
            f'<line x1="{x}" y1="{key_y - 4}" x2="{x + 40}" y2="{key_y - 4}" stroke="#555" '
            f'stroke-width="{w * g["maxStroke"]}"/><text x="{x + 46}" y="{key_y}" class="hv-note">{w:g}'
            "</text>"
        )
    width = max(shown * panel + (shown - 1) * 40, 430, len(title) * 9.5)  # bold 15px: about 9 px a character
    style = (
        f"<style>.hv-title{{font:bold 15px {FONTS}}} .hv-head{{font:bold 13px {FONTS}}} "
        f".hv-token{{font:{g['font']}px {MONO};fill:#222}} .hv-note{{font:12px {FONTS};fill:#555}}</style>"
    )
    return style + "".join(parts), width, height


def _y(i: int) -> float:
    """The middle of token row ``i`` (below the panel's head name)."""
    return GEOMETRY["top"] + (i + 0.5) * GEOMETRY["row"]


STYLE = """
body { font-family: %(fonts)s; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 28px 0 8px; }
p.how { margin: 0 0 12px; color: #555; font-size: 13px; max-width: 60em; }
.controls { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; margin-bottom: 10px; font-size: 13px; }
.heads { display: flex; flex-wrap: wrap; gap: 4px; }
.heads button { font: 12px %(mono)s; border: 2px solid var(--c); background: var(--c); color: #fff;
  border-radius: 3px; padding: 1px 6px; cursor: pointer; }
.heads button[aria-pressed="false"] { background: #fff; color: var(--c); }
#view text.token { font: %(font)spx %(mono)s; fill: #222; cursor: pointer; }
#view text.token.active { font-weight: bold; fill: #000; }
#view text.token.dim { fill: #bbb; }
#view text.column { font: bold 12px %(fonts)s; fill: #555; }
#view line.link { stroke-opacity: 0.7; }
#view line.link.dim { display: none; }
#numbers { font: 12px %(mono)s; white-space: pre-wrap; min-height: 3em; color: #333; margin: 8px 0; }
section.terminal pre { padding: 12px; overflow-x: auto; font-family: %(mono)s; font-size: 12px; }
[hidden] { display: none !important; }
#explore { margin: 8px 0 18px; font-size: 13px; }
#explore label { display: inline-flex; gap: 6px; align-items: center; margin-right: 18px; }
#explore input[type=range] { width: 180px; }
#explore .formula { font: 13px %(mono)s; margin: 6px 0; color: #222; }
#explore table { border-collapse: collapse; font: 12px %(mono)s; margin: 6px 12px 6px 0; display: inline-table;
  vertical-align: top; }
#explore th { font-weight: bold; padding: 2px 6px; color: #555; }
#explore td { padding: 2px 6px; text-align: right; min-width: 3.5em; }
#explore td.forbidden { color: #777; background: repeating-linear-gradient(45deg, #eee 0 4px, #ccc 4px 6px); }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("attn-data").textContent);
  var raw = atob(data.weights), bytes = new Uint8Array(raw.length);
  for (var b = 0; b < raw.length; b++) bytes[b] = raw.charCodeAt(b);
  var W = new Float32Array(bytes.buffer);  // [layers, heads, queries, keys], as attn computed them
  var nL = data.shape[0], nH = data.shape[1], nQ = data.shape[2], nK = data.shape[3];
  var G = data.geometry, NS = "http://www.w3.org/2000/svg";
  function at(l, h, q, k) { return W[((l * nH + h) * nQ + q) * nK + k]; }
  function width(labels) {
    return Math.max(4, Math.max.apply(null, labels.map(function (t) { return t.length; }))) * 0.6 * G.font;
  }
  // the queries' column is at least as wide as its title, which is drawn right-aligned at xL
  var left = Math.max(width(data.queries), "queries".length * 0.6 * G.font), xL = left, xR = left + 2 * G.pad + G.gap;
  function y(i) { return G.top + (i + 0.5) * G.row; }
  var state = {layer: 0, heads: [], token: null, pinned: false};
  for (var h = 0; h < nH; h++) state.heads.push(h);

  var svg = document.getElementById("view");
  svg.setAttribute("width", xR + width(data.keys) + 10);
  svg.setAttribute("height", G.top + Math.max(nQ, nK) * G.row + 10);
  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  }
  el("text", {x: xL, y: 14, "text-anchor": "end", "class": "column"}, "queries");
  el("text", {x: xR, y: 14, "class": "column"}, "keys");
  var links = el("g", {id: "links"});
  var tokens = [];
  function token(side, i, label) {
    var t = el("text", {x: side === "q" ? xL : xR, y: y(i) + 4, "class": "token",
                        "text-anchor": side === "q" ? "end" : "start", "data-side": side, "data-index": i}, label);
    t.addEventListener("mouseenter", function () { if (!state.pinned) { state.token = [side, i]; draw(); } });
    t.addEventListener("mouseleave", function () { if (!state.pinned) { state.token = null; draw(); } });
    t.addEventListener("click", function () {
      var same = state.pinned && state.token && state.token[0] === side && state.token[1] === i;
      state.pinned = !same; state.token = same ? null : [side, i]; draw();
    });
    tokens.push(t);
  }
  data.queries.forEach(function (label, i) { token("q", i, label); });
  data.keys.forEach(function (label, j) { token("k", j, label); });

  var select = document.getElementById("layer");
  data.layers.forEach(function (name, l) {
    var o = document.createElement("option"); o.value = l; o.textContent = name || "weights"; select.appendChild(o);
  });
  document.getElementById("layer-axis").textContent = data.layerAxis;
  if (nL < 2) document.getElementById("layer-control").hidden = true;
  select.addEventListener("change", function () { state.layer = +select.value; draw(); });
  var buttons = document.getElementById("heads");
  data.heads.forEach(function (name, h) {
    var button = document.createElement("button");
    button.type = "button"; button.textContent = name; button.dataset.head = h;
    button.style.setProperty("--c", data.colours[h]);
    button.title = "click: show or hide this head; double-click: this head only";
    button.addEventListener("click", function () {
      var at = state.heads.indexOf(h);
      if (at >= 0) state.heads.splice(at, 1); else state.heads.push(h);
      state.heads.sort(function (a, b) { return a - b; }); draw();
    });
    button.addEventListener("dblclick", function () { state.heads = [h]; draw(); });
    buttons.appendChild(button);
  });
  if (nH < 2) buttons.hidden = true;  // one head: nothing to pick

  function fmt(w) { return w.toFixed(4); }
  function draw() {
    while (links.firstChild) links.removeChild(links.firstChild);
    var l = state.layer, t = state.token;
    select.value = l;
    Array.prototype.forEach.call(buttons.children, function (button) {
      button.setAttribute("aria-pressed", state.heads.indexOf(+button.dataset.head) >= 0 ? "true" : "false");
    });
    state.heads.forEach(function (h) {
      for (var q = 0; q < nQ; q++) for (var k = 0; k < nK; k++) {
        var w = at(l, h, q, k);
        if (!(w >= G.minWeight)) continue;
        var line = document.createElementNS(NS, "line");
        var mine = !t || (t[0] === "q" ? t[1] === q : t[1] === k);
        line.setAttribute("class", mine ? "link" : "link dim");
        line.setAttribute("x1", xL + G.pad); line.setAttribute("y1", y(q));
        line.setAttribute("x2", xR - G.pad); line.setAttribute("y2", y(k));
        line.setAttribute("stroke", data.colours[h]);
        line.setAttribute("stroke-width", w * G.maxStroke);
        line.dataset.layer = l; line.dataset.head = h; line.dataset.q = q; line.dataset.k = k;
        line.dataset.w = w;
        var title = document.createElementNS(NS, "title");
        title.textContent = data.queries[q] + " \u2192 " + data.keys[k] + ": " + fmt(w) + " (" + data.heads[h] + ")";
        line.appendChild(title);
        links.appendChild(line);
      }
    });
    tokens.forEach(function (e) {
      var side = e.dataset.side, i = +e.dataset.index;
      var active = t && t[0] === side && t[1] === i;
      e.setAttribute("class", "token" + (active ? " active" : t && t[0] === side ? " dim" : ""));
    });
    numbers(l, t);
  }
  function numbers(l, t) {
    var out = document.getElementById("numbers");
    if (!t) { out.textContent = "Hover over a token for its weights; click to keep them."; return; }
    var lines = [];
    state.heads.forEach(function (h) {
      var pairs = [], n = t[0] === "q" ? nK : nQ, forbidden = 0;
      for (var i = 0; i < n; i++) {
        var w = t[0] === "q" ? at(l, h, t[1], i) : at(l, h, i, t[1]);
        if (w !== w) { forbidden++; continue; }  // NaN: a pair the mask forbids, not a weight of 0
        pairs.push([w, t[0] === "q" ? data.keys[i] : data.queries[i]]);
      }
      pairs.sort(function (a, b) { return b[0] - a[0]; });
      lines.push(data.heads[h] + ": " + pairs.slice(0, 8).map(function (p) {
        return p[1] + " " + fmt(p[0]); }).join("  ") + (pairs.length > 8 ? "  \u2026" : "") +
        (forbidden ? "  (" + forbidden + " forbidden)" : ""));
    });
    var who = t[0] === "q" ? data.queries[t[1]] + " attends to" : data.keys[t[1]] + " is attended by";
    out.textContent = who + (data.layers[l] ? " (" + data.layers[l] + ")" : "") + ":\n" + lines.join("\n");
  }
  // The state can come from the address: #layer=5&heads=11,3&query=11 (or key=3), e.g. to share a view.
  var hash = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
    var kv = pair.split("="); if (kv[0]) hash[kv[0]] = decodeURIComponent(kv[1] || "");
  });
  if (hash.layer !== undefined && +hash.layer >= 0 && +hash.layer < nL) state.layer = +hash.layer;
  if (hash.heads !== undefined) state.heads = hash.heads.split(",").map(Number).filter(function (h) {
    return h >= 0 && h < nH; });
  if (hash.query !== undefined && +hash.query < nQ) { state.token = ["q", +hash.query]; state.pinned = true; }
  if (hash.key !== undefined && +hash.key < nK) { state.token = ["k", +hash.key]; state.pinned = true; }
  draw();
  if (data.explore) explore(data.explore, hash);
  document.body.dataset.ready = "yes";

  // One head small enough to recompute: the same steps as attn, softmax(scores · scale / T + bias) · V,
  // for the temperature and scale the sliders choose (each slider moves a power of 2).
  function explore(E, hash) {
    var section = document.getElementById("explore"), nq = E.scores.length, nk = E.scores[0].length;
    var tSlider = document.getElementById("temperature"), sSlider = document.getElementById("scale");
    var T = E.temperature, S = E.scale;
    if (hash.temperature !== undefined && +hash.temperature > 0) T = +hash.temperature;
    if (hash.scale !== undefined && +hash.scale > 0) S = +hash.scale;
    tSlider.value = Math.log2(T); sSlider.value = Math.log2(S / E.scale);
    section.hidden = false;
    function ok(q, k) { return !E.allowed || E.allowed[q][k]; }
    function weights() {
      var out = [];
      for (var q = 0; q < nq; q++) {
        var logits = [], top = -Infinity;
        for (var k = 0; k < nk; k++) {
          var x = ok(q, k) ? E.scores[q][k] * S / T + (E.bias ? E.bias[q][k] : 0) : -Infinity;
          logits.push(x); if (x > top) top = x;
        }
        var sum = 0, row = logits.map(function (x) {
          var e = top === -Infinity ? 0 : Math.exp(x - top); sum += e; return e;
        });
        out.push(row.map(function (e) { return sum > 0 ? e / sum : 0; }));
      }
      return out;
    }
    function cell(tr, text, cls) {
      var td = document.createElement(cls === "th" ? "th" : "td"); td.textContent = text;
      if (cls && cls !== "th") td.className = cls; tr.appendChild(td); return td;
    }
    var stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis
    function colour(x) {
      x = Math.max(0, Math.min(1, x)) * (stops.length - 1);
      var i = Math.min(Math.floor(x), stops.length - 2), f = x - i, a = stops[i], b = stops[i + 1];
      var c = a.map(function (v, j) { return Math.round(v + (b[j] - v) * f); });
      return ["rgb(" + c.join(",") + ")", 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] > 110 ? "#000" : "#fff"];
    }
    function update() {
      var P = weights(), largest = 0;
      P.forEach(function (row) { row.forEach(function (w) { if (w > largest) largest = w; }); });
      var top = largest > 0 && largest < 0.5 ? largest : 1;  // as the terminal: to the largest below 0.5
      var table = document.getElementById("explore-weights"); table.textContent = "";
      var head = document.createElement("tr"); cell(head, "weights", "th");
      data.keys.forEach(function (k) { cell(head, k, "th"); }); table.appendChild(head);
      for (var q = 0; q < nq; q++) {
        var tr = document.createElement("tr"); cell(tr, data.queries[q], "th");
        for (var k = 0; k < nk; k++) {
          if (!ok(q, k)) {
            var f = cell(tr, "\u2013", "forbidden"); f.dataset.q = q; f.dataset.k = k; f.title = "forbidden";
            continue;
          }
          var td = cell(tr, P[q][k].toFixed(3), "weight"), c = colour(P[q][k] / top);
          td.style.background = c[0]; td.style.color = c[1];
          td.dataset.q = q; td.dataset.k = k; td.dataset.w = P[q][k];
          W[q * nK + k] = P[q][k];  // the lines above follow
        }
        table.appendChild(tr);
      }
      var output = document.getElementById("explore-output"); output.textContent = "";
      var oh = document.createElement("tr"); cell(oh, "output", "th");
      E.columns.forEach(function (c) { cell(oh, c, "th"); }); output.appendChild(oh);
      for (q = 0; q < nq; q++) {
        var row = document.createElement("tr"); cell(row, data.queries[q], "th");
        for (var c = 0; c < E.columns.length; c++) {
          var o = 0;
          for (k = 0; k < nk; k++) o += P[q][k] * E.values[k][c];
          var od = cell(row, o.toFixed(3), "value"); od.dataset.q = q; od.dataset.c = c; od.dataset.value = o;
        }
        output.appendChild(row);
      }
      var given = " (" + E.scaleText + (S === E.scale ? "" : " \u00d7 " + (S / E.scale).toPrecision(3)) + ")";
      document.getElementById("temperature-value").textContent = "T = " + T.toPrecision(3);
      document.getElementById("scale-value").textContent = S.toPrecision(4) + given;
      document.getElementById("formula").textContent = "weights = softmax(scores \u00d7 " + S.toPrecision(4) +
        " / " + T.toPrecision(3) + (E.bias ? " + bias" : "") + ")   output = weights \u00b7 V" +
        (E.allowed ? "   (\u2013 = forbidden: weight 0)" : "");
      document.getElementById("explore-legend").textContent = "colours: 0 to " + (top === 1 ? "1" : top.toFixed(3) +
        " (the largest weight)") + ". Above 1 the temperature flattens the weights, below 1 it sharpens them.";
      section.dataset.temperature = T; section.dataset.scale = S;
      draw();
    }
    tSlider.addEventListener("input", function () { T = Math.pow(2, +tSlider.value); update(); });
    sSlider.addEventListener("input", function () { S = E.scale * Math.pow(2, +sSlider.value); update(); });
    update();
  }
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{heading}</h1>
<p class="how">Each query on the left is joined to each key on the right by a line as thick as its weight,
one colour per head. Hover over a token to see only its lines and its weights; click it to keep them.
Click a head to show or hide it, double-click for that head alone.</p>
<div class="controls">
<label id="layer-control"><span id="layer-axis">layer</span> <select id="layer"></select></label>
<div class="heads" id="heads"></div>
</div>
<section id="explore" hidden>
<h2>Explore: change the temperature and the scale</h2>
<label>temperature <input type="range" id="temperature" min="-4" max="4" step="0.01">
<span id="temperature-value"></span></label>
<label>scale <input type="range" id="scale" min="-4" max="4" step="0.01"> <span id="scale-value"></span></label>
<div class="formula" id="formula"></div>
<table id="explore-weights"></table><table id="explore-output"></table>
<div class="formula" id="explore-legend"></div>
</section>
<div id="numbers"></div>
<svg id="view" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="attention lines between tokens"></svg>
{terminal}
<script type="application/json" id="attn-data">{data}</script>
<script>
window.addEventListener("error", function (e) {{ document.body.dataset.error = String(e.message); }});
{script}
</script>
</body>
</html>
"""
# The style needs the fonts filled in; braces in CSS are not format fields there.
STYLE = STYLE % {"fonts": FONTS, "mono": MONO, "font": GEOMETRY["font"]}
