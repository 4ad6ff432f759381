#!/usr/bin/env python3
"""Reads plot_write's SVG back: it parses as SVG, has the two panels, one
curve per series with samples (the empty one only in the legend), and every
point, mapped back through the panel's axis range, is the datum it came
from (the CDF: the sorted samples at (i+1)/n; the lines: (x, y))."""
import math
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("plot_check: FAILED: " + msg)
    sys.exit(1)


def points(d):
    pts = re.findall(r"[ML]\s*([-0-9.]+) ([-0-9.]+)", d)
    return [(float(x), float(y)) for x, y in pts]


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))


root = ET.parse(sys.argv[1]).getroot()
if root.tag != SVG + "svg":
    fail("root element is %s, not svg" % root.tag)
panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
if [p.get("data-kind") for p in panels] != ["cdf-log10-x", "lines"]:
    fail("panels: %s" % [p.get("data-kind") for p in panels])
expect = [
    {"nxr <one context per domain>": sorted([2.0, 0.5, 1.0, 40.0, 3.0]),
     "OpenMP & co": sorted([7.0, 150.0, 9.5])},
    {"nxr": [(0, 120.0), (1, 240.0), (2, 230.0), (3, 250.0)]},
]
for panel, want in zip(panels, expect):
    left, top, width, height = (float(panel.get(k)) for k in ("data-left", "data-top", "data-width", "data-height"))
    x0, x1, y0, y1 = (float(panel.get(k)) for k in ("data-x0", "data-x1", "data-y0", "data-y1"))
    curves = {p.get("data-series"): points(p.get("d")) for p in panel.iter(SVG + "path") if p.get("class") == "curve"}
    if sorted(curves) != sorted(want):
        fail("curves %s, expected %s" % (sorted(curves), sorted(want)))
    for name, pts in curves.items():
        data = want[name]
        if len(pts) != len(data):
            fail("%s: %d points for %d samples" % (name, len(pts), len(data)))
        for i, (px, py) in enumerate(pts):
            xv = x0 + (px - left) / width * (x1 - x0)
            yv = y0 + (top + height - py) / height * (y1 - y0)
            if panel.get("data-kind") == "cdf-log10-x":
                if not close(10 ** xv, data[i], 1e-3) or not close(yv, (i + 1) / len(data), 1e-3):
                    fail("%s point %d is (%g ms, %g), expected (%g ms, %g)" % (name, i, 10 ** xv, yv, data[i], (i + 1) / len(data)))
            elif not close(xv, data[i][0], 1e-3) or not close(yv, data[i][1], 1e-3):
                fail("%s point %d is (%g, %g), expected %s" % (name, i, xv, yv, data[i]))
legend = "".join(t.text or "" for t in root.iter(SVG + "text"))
if "flat (not run) (0)" not in legend:
    fail("the empty series is not in the legend")
print("plot_check: ok, 2 panels, 3 curves, every point on its datum")
