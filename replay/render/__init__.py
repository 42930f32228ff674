"""Rendering a run's read model: the static HTML/Markdown report (`report.py`, `kernels.py`),
its SVG charts (`svg.py`), HTML helpers (`htmlkit.py`) and the number formats every view
shares (`fmt.py`). The read model itself (the fold, verify, lineage, summaries) is the rest
of `replay/`; this package only presents it."""
