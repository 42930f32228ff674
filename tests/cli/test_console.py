"""cli/console.py's columns_table: the tables of `suite list`, `suite import-nkibench` and
`memory list/search`, their figures right-justified."""

from __future__ import annotations

from rich.console import Console

from cli.console import columns_table


def test_the_named_columns_are_right_justified_the_rest_left() -> None:
    t = columns_table("suite cpu", ("problem", "GFLOP", "min MiB", "notes"), right=("GFLOP", "min MiB"))
    assert [(c.header, c.justify) for c in t.columns] == [
        ("problem", "left"),
        ("GFLOP", "right"),
        ("min MiB", "right"),
        ("notes", "left"),
    ]
    t.add_row("silu", "1.5", "8.0", "")
    t.add_row("matmul", "1000.25", "96.0", "")
    con = Console(width=80, record=True)
    con.print(t)
    lines = con.export_text().splitlines()
    row1, row2 = (next(ln for ln in lines if name in ln) for name in ("silu", "matmul"))
    assert row1.index("1.5") + len("1.5") == row2.index("1000.25") + len("1000.25")  # right edges align
