"""The head-to-head page's "held" mark: its tooltip's figure of how far a hold moves a time
is computed from the series' own trend on the page (kperf/site/headtohead.py
``hold_effect``), not one RMSNorm's figure stated for every cell."""

from __future__ import annotations

import html as htmllib
import re

import pytest

from kperf.site import data, headtohead

from ._site import _files, _record

OLDER, NEWER = "a" * 40, "b" * 40


def _recs(holds: dict[tuple[str, str], float | None]) -> list[dict]:
    recs = []
    for (commit, backend), hold in holds.items():
        r = _record(commit)
        r["params"]["backend"] = backend
        if hold is not None:
            r["measurement"]["rep_hold_s"] = hold
        recs.append(r)
    return recs


def _page(times: dict[str, dict[str, float]], holds: dict[tuple[str, str], float | None]
          ) -> tuple[list[headtohead.Cell], dict[str, str]]:
    files = [_files(times[OLDER], OLDER), _files(times[NEWER], NEWER)]
    views = headtohead.build({"m1": {"gpu": "G"}}, files, {}, _recs(holds),
                             revisions={OLDER: 1, NEWER: 2})
    cells = views[0].tables[0].rows[0][2]
    page = headtohead.render(views, data.Notes(), "https://h/commit/", {})
    titles = {}  # backend -> its held mark's tooltip, for the rows that have one
    for row in page.split("<tr")[1:]:
        backend = re.search(r'data-backend="(\w+)"', row)
        mark = re.search(r'class="(?:why|muted) held" title="([^"]*)"', row)
        if backend and mark:
            titles[backend.group(1)] = htmllib.unescape(mark.group(1))
    assert "1.4%" not in page
    return cells, titles


def test_the_held_tooltip_states_the_series_own_held_against_unheld_times() -> None:
    """TileLang timed unheld at the older commit (210 us) and behind 150 us at the newer
    (200 us): its tooltip reads 4.8% faster held; Triton unheld 300 us, then held 330 us:
    10.0% slower. Each cell its own figure, from the times its trend shows."""
    times = {OLDER: {"tilelang": 2.1e-4, "triton": 3.0e-4, "torch": 1.0e-4},
             NEWER: {"tilelang": 2.0e-4, "triton": 3.3e-4, "torch": 1.0e-4}}
    holds = {(OLDER, "tilelang"): 0.0, (OLDER, "triton"): 0.0, (OLDER, "torch"): None,
             (NEWER, "tilelang"): 150e-6, (NEWER, "triton"): 165e-6, (NEWER, "torch"): None}
    cells, titles = _page(times, holds)
    tl, tr, torch = cells
    assert tl.trend == [2.1e-4, 2.0e-4] and tl.trend_hold == [0.0, 150e-6]
    assert headtohead.hold_effect(tl) == (pytest.approx(2.0 / 2.1 - 1), 1, 1)
    assert headtohead.hold_effect(tr) == (pytest.approx(0.1), 1, 1)
    assert headtohead.hold_effect(torch) is None and torch.trend_hold == [None, None]
    assert "behind a 150 µs hold" in titles["tilelang"]
    assert "its 1 held commit(s) read 4.8% faster than its 1 unheld" in titles["tilelang"]
    assert "behind a 165 µs hold" in titles["triton"]
    assert "read 10.0% slower than its 1 unheld" in titles["triton"]
    assert "torch" not in titles  # no hold recorded: no mark


def test_a_held_cell_whose_trend_has_no_unheld_commit_states_no_figure() -> None:
    times = {OLDER: {"tilelang": 2.1e-4, "triton": 3.0e-4, "torch": 1.0e-4},
             NEWER: {"tilelang": 2.0e-4, "triton": 3.3e-4, "torch": 1.0e-4}}
    holds = {(OLDER, "tilelang"): 150e-6, (NEWER, "tilelang"): 150e-6,
             (OLDER, "triton"): None, (NEWER, "triton"): 150e-6}
    cells, titles = _page(times, holds)
    assert [headtohead.hold_effect(c) for c in cells[:2]] == [None, None]
    for backend in ("tilelang", "triton"):
        assert "no held and unheld commits both, so no figure" in titles[backend], backend
        assert not re.search(r"\d%", titles[backend]), titles[backend]
