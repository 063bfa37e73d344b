"""Write the icon SVG sources: the "H in a ring" glyph, with a state badge, per panel variant.

One geometry for every state, so the glyph never changes under a badge: the badge sits inside the
canvas (nothing cut at the top) and clear of the H (it stays an "H", not an "h", at 22 px); only
the ring is cut around the badge. Then render them: ``python resources/render_icons.py``.

    QT_QPA_PLATFORM=offscreen python resources/icon_sources.py && \\
    QT_QPA_PLATFORM=offscreen python resources/render_icons.py
"""

from __future__ import annotations

from pathlib import Path

SVG_DIR = Path(__file__).resolve().parent / "icons" / "svg"

# glyph: ring centre (28, 36) r 22, H stems x 19 / 37 from y 25 to 47 (round caps 3.5)
RING = '<circle cx="28" cy="36" r="22" stroke-width="6"/>'
H = '<path d="M19 25v22M37 25v22M19 36h18" stroke-width="7"/>'
# badge: centre (50, 14), r 11.5 + a 1.5 halo in the panel colour; top at y 1, right at x 63;
# the H's right stem top (37, 21.5 with its cap) is 14.9 from the centre: never touched
BX, BY, BR = 50, 14, 11.5
CUT = 15.0  # the ring is cut this far around the badge, so the two read apart at 16 px
GLYPHS = {
    "attention": ('<path d="M50 7.5v8" stroke="{fg}" stroke-width="4.2" stroke-linecap="round"/>'
                  '<circle cx="50" cy="20.8" r="2.5" fill="{fg}"/>'),
    "busy": '<path d="M46.5 8.5l9 5.5-9 5.5z" fill="{fg}" stroke="{fg}" stroke-width="2" stroke-linejoin="round"/>',
    "paused": '<path d="M46.5 9v10M53.5 9v10" stroke="{fg}" stroke-width="3.8" stroke-linecap="round"/>',
    "finished": ('<path d="M44.5 14.5l3.8 3.8 7.2-8" fill="none" stroke="{fg}" stroke-width="3.8" '
                 'stroke-linecap="round" stroke-linejoin="round"/>'),
    "gave-up": '<path d="M45.5 9.5l9 9M54.5 9.5l-9 9" stroke="{fg}" stroke-width="3.8" stroke-linecap="round"/>',
}
BADGE = {"attention": "#f28c28", "busy": "#2f80ed", "paused": "#8a94a6", "finished": "#27ae60", "gave-up": "#d64545"}
# variant -> (glyph colour, halo = the panel it sits on). "note": for notifications, whose bubbles are light
# or dark by the theme: the dark glyph of "light" inside a white outline reads on both
VARIANTS = {"light": ("#1f2933", "#ffffff"), "dark": ("#f5f7fa", "#1f2933"), "mono": ("#000000", None),
            "note": ("#1f2933", "#ffffff")}
OUTLINE = 4.5  # extra stroke width of the "note" variant's outline (2.25 on each side of a stem)
STATES = ("idle", "attention", "busy", "paused", "finished", "gave-up")


def svg(state: str, variant: str) -> str:
    fg, halo = VARIANTS[variant]
    opacity = "0.55" if state == "paused" else "1.0"
    glyph_ring = f'<g fill="none" stroke="{fg}" stroke-opacity="{opacity}" stroke-linecap="round">{RING}</g>'
    glyph_h = f'<g fill="none" stroke="{fg}" stroke-opacity="{opacity}" stroke-linecap="round">{H}</g>'
    if variant == "note":  # the same strokes, wider and white, underneath
        ring_out = RING.replace('stroke-width="6"', f'stroke-width="{6 + OUTLINE}"')
        h_out = H.replace('stroke-width="7"', f'stroke-width="{7 + OUTLINE}"')
        glyph_ring = f'<g fill="none" stroke="{halo}" stroke-linecap="round">{ring_out}</g>' + glyph_ring
        glyph_h = f'<g fill="none" stroke="{halo}" stroke-linecap="round">{h_out}</g>' + glyph_h
    head = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">\n'
            f"<title>hermes-tray {state} ({variant})</title>\n")
    if state == "idle":
        return head + glyph_ring + glyph_h + "\n</svg>\n"
    cut = (f'<mask id="cut"><rect width="64" height="64" fill="white"/>'
           f'<circle cx="{BX}" cy="{BY}" r="{CUT}" fill="black"/></mask>')
    body = f'{cut}\n<g mask="url(#cut)">{glyph_ring}</g>{glyph_h}\n'
    if variant == "mono":  # one colour the system tints: the badge symbol is punched out of a disc
        symbol = GLYPHS[state].format(fg="black")
        body += (f'<mask id="m"><rect width="64" height="64" fill="white"/>{symbol}</mask>'
                 f'<circle cx="{BX}" cy="{BY}" r="{BR}" fill="{fg}" mask="url(#m)"/>')
    else:
        body += (f'<circle cx="{BX}" cy="{BY}" r="{BR + 1.5}" fill="{halo}"/>'
                 f'<circle cx="{BX}" cy="{BY}" r="{BR}" fill="{BADGE[state]}"/>' + GLYPHS[state].format(fg="#ffffff"))
    return head + body + "\n</svg>\n"


def main() -> int:
    SVG_DIR.mkdir(parents=True, exist_ok=True)
    for state in STATES:
        for variant in VARIANTS:
            (SVG_DIR / f"hermes-tray-{state}-{variant}.svg").write_text(svg(state, variant))
    print(f"wrote {len(STATES) * len(VARIANTS)} SVG sources into {SVG_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
