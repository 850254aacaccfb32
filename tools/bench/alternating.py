"""What the A/B benchmarks share (what security costs, what metrics cost): each round runs every
mode once, on a fresh ``sowd`` process, in an order that alternates from round to round, so that
the machine's drift between runs (other work, thermal, the page cache) hits every mode alike;
then the median of each figure per mode, and each mode's ratio to the first.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _start  # a sibling script, not a package

from sowdb.config.model import DEFAULT_RECORD_STORE, RECORD_STORES

Figures = dict[str, float]


@contextmanager
def fresh_sowd(
    config: Callable[[Path], Path], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A ``sowd`` on a new data directory, with the config ``config(directory)`` writes there;
    (process, target). Stopped (SIGTERM) on leaving."""
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as tmp:
        proc, target = _start(str(Path(tmp) / "data"), "--config", str(config(Path(tmp))), env=env)
        try:
            yield proc, target
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def alternate(
    modes: Sequence[str], rounds: int, measure: Callable[[str], Figures], label: str = ""
) -> dict[str, list[Figures]]:
    """``rounds`` rounds of ``measure(mode)`` for every mode, in alternating order (forwards in
    even rounds, backwards in odd ones); each round's figures are printed as they come."""
    runs: dict[str, list[Figures]] = {m: [] for m in modes}
    width = max(map(len, modes))
    for r in range(rounds):
        for mode in modes if r % 2 == 0 else modes[::-1]:
            figures = measure(mode)
            runs[mode].append(figures)
            shown = ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())
            print(f"round {r + 1} {label}{mode:{width}}: {shown}", flush=True)
    return runs


def medians(runs: dict[str, list[Figures]]) -> dict[str, Figures]:
    """The median of each figure, per mode."""
    return {mode: {k: statistics.median(f[k] for f in figures) for k in figures[0]} for mode, figures in runs.items()}


def print_medians(runs: dict[str, list[Figures]], heading: str) -> dict[str, Figures]:
    """A table of the medians, each mode beside the first, with its ratio to it; returns them."""
    med = medians(runs)
    first, *others = list(med)
    print(f"\n{heading}")
    columns = [first, *others, *(f"{m}/{first}" for m in others)]
    print(f"{'figure':20} " + " ".join(f"{c:>12}" for c in columns))
    for key in med[first]:
        values = [med[m][key] for m in (first, *others)]
        ratios = [med[m][key] / med[first][key] if med[first][key] else float("nan") for m in others]
        print(f"{key:20} " + " ".join(f"{v:12,.2f}" for v in values) + " ".join(f"{r:13.3f}" for r in ratios))
    return med


STORE_CHOICES = (*RECORD_STORES, "both")
"""``--store``: one record store, or both alternating round by round (objects first, so that
:func:`print_medians`'s ratios read arena/objects)."""


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """The benchmarks' ``--store arena|objects|both`` (default: the server's default store)."""
    parser.add_argument(
        "--store",
        choices=STORE_CHOICES,
        default=DEFAULT_RECORD_STORE,
        help="[server] record_store; 'both': the two alternating round by round, medians and arena/objects",
    )


def stores(choice: str) -> list[str]:
    """The record stores a ``--store`` choice runs."""
    return list(RECORD_STORES) if choice == "both" else [choice]


def server_section(store: str) -> str:
    """The TOML that sets ``[server] record_store`` (prepended to a benchmark's config)."""
    return f'[server]\nrecord_store = "{store}"\n'
