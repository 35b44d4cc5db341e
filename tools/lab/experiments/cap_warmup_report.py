"""Read ``tools.lab.blocks --file tools/lab/experiments/cap-warmup.json``'s output folder: per
kernel and slot, each block's warm-up and how far the mean of its first 10 trials lies
from the mean of its trials 11-30 (a level still moving after the warm-up shows there).

    python tools/lab/experiments/cap_warmup_report.py out/blocks
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(data: dict) -> list[str]:
    out = []
    for block in data["blocks"]:
        samples = block["samples"]
        head, rest = statistics.fmean(samples[:10]), statistics.fmean(samples[10:30])
        clocks = [w.get("sm_clock_mhz_mean") for w in block["windows"]]
        clock = statistics.fmean([c for c in clocks if c]) if any(clocks) else float("nan")
        out.append(f"| {data['slots'][block['slot']].get('plan', {})} | {block['round']} | "
                   f"{block['warmup_s']:.2f} | {block['warmup_trials']} | "
                   f"{rest * 1e6:.1f} | {head / rest - 1:+.2%} | {clock:.0f} |")
    return out


def main(folder: Path) -> None:
    for path in sorted(folder.glob("*.json")):
        print(f"\n{path.stem}\n")
        print("| slot plan | round | warm-up s | warm-up trials | trials 11-30 us | "
              "trials 1-10 vs 11-30 | SM MHz |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows(json.loads(path.read_text()))))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
