"""FlashInfer-Bench interchange: read and write trace-set folders, import them as suites.

    ts = TraceSet.load("path/to/flashinfer-trace")      # lossless: ts.save(out) reproduces it
    ts.skipped                                           # files left out, each with the reason
    problems = problems_from(ts)                         # one Problem per definition
    write_suite(problems, "suites/fib", name="fib")      # then `accelopt run --suite fib`
    export_problems(suites.load_suite("triton"), "out")  # FlashInfer-Bench loads `out`

CLI: `accelopt suite import-flashinfer PATH --out DIR` and
`accelopt suite export-flashinfer SUITE OUT`. See docs/triton.md.
"""

from suites.flashinfer.convert import (
    choose_baseline,
    export_problems,
    load_suite_dir,
    problems_from,
    reference_solution,
    trace_set_from_problems,
    workload_elements,
    write_suite,
)
from suites.flashinfer.folder import Skipped
from suites.flashinfer.traceset import FIB_LANGUAGES, FlashInferImportError, TraceSet, merge_raw, to_fib

__all__ = [
    "FIB_LANGUAGES",
    "FlashInferImportError",
    "Skipped",
    "TraceSet",
    "choose_baseline",
    "export_problems",
    "load_suite_dir",
    "merge_raw",
    "problems_from",
    "reference_solution",
    "to_fib",
    "trace_set_from_problems",
    "workload_elements",
    "write_suite",
]
