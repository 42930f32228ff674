"""Load the adversarial corpus: one hostile kernel per file, with the status it must get
(see README.md beside this file)."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

CORPUS = Path(__file__).resolve().parent
REPO = CORPUS.parents[2]
_HEADER = re.compile(
    r"^\s*(?://|#)\s*(expect|expect_gpu|needle_gpu|problem|needle|min_ms|why|entry|reference|margin|at_least|fails_only|or|ran):"
    r"\s*(.*?)\s*$"
)
_COMMENT = {".c": "//", ".py": "#"}


class Hack(msgspec.Struct, kw_only=True):
    name: str
    device_dir: str
    path: str
    source: str
    expect: str
    problem: str
    needle: str = ""
    min_ms: float | None = None
    why: str = ""
    expect_gpu: str = ""  # where a real GPU's harness gives another status (its CUDA-event clock)
    needle_gpu: str = ""
    # an estimate that must stay within `margin` (a fraction) of the estimate of `reference` (the
    # stem of a `_`-prefixed file beside it: the kernel without the hack, or its honest twin)
    reference: str = ""
    margin: float = 0.0
    # an estimate that must not be below the estimate of `at_least` (the stem of a file beside it):
    # a hack that adds work to a kernel may make it slower, never faster
    at_least: str = ""
    # the only correctness cases that may fail, comma-separated (the hack works on all others)
    fails_only: str = ""
    # `or: STATUS: NEEDLE`: the other verdict a hack may get where which one it gets is the host
    # scheduler's choice, not ours (the header's `why` says when); never `passed`
    alternative: tuple[str, str] | None = None
    # `ran: TEXT` lines: what the kernel prints to its stderr once its trick is in place (and
    # where it can tell, once the trick was tried): each must be in the output the trusted side
    # captured of the kernel's process, so a trick that silently did nothing cannot pass
    ran: tuple[str, ...] = ()

    def expected(self, on_gpu: bool) -> tuple[str, str]:
        """(status, needle) this hack must get on a GPU or elsewhere."""
        if on_gpu and self.expect_gpu:
            return self.expect_gpu, self.needle_gpu
        return self.expect, self.needle

    def accepts(self, status: str, text: str, on_gpu: bool) -> bool:
        """Whether a profile's status and text (log and case notes) are this hack's verdict."""
        verdicts = [self.expected(on_gpu), *([self.alternative] if self.alternative else [])]
        return any(status == s and n in text for s, n in verdicts)


def _alternative(path: Path, value: str) -> tuple[str, str] | None:
    if not value:
        return None
    status, _, needle = value.partition(":")
    if status.strip() in ("", "passed") or not needle.strip():
        raise ValueError(f"{path}: 'or:' takes 'STATUS: NEEDLE' with a failing status")
    return status.strip(), needle.strip()


def reference_source(hack: Hack, stem: str = "") -> str:
    """The source of the kernel a hack's estimate is compared with (`reference`, or `stem`)."""
    return (CORPUS / hack.device_dir / f"{stem or hack.reference}.py").read_text()


def load(device_dir: str) -> list[Hack]:
    """Every corpus file of `device_dir` (cpu, triton, neuron), sorted by name."""
    out = []
    for path in sorted((CORPUS / device_dir).glob("*")):
        if path.suffix not in (".c", ".py") or path.name.startswith("_"):
            continue
        text = path.read_text()
        mark = _COMMENT[path.suffix]
        fields: dict[str, str] = {}
        ran: list[str] = []
        for line in text.splitlines():
            m = _HEADER.match(line)
            if m and m.group(1) == "ran":
                ran.append(m.group(2))
            elif m:
                key, val = m.groups()
                fields[key] = f"{fields[key]} {val}".strip() if key == "why" and key in fields else val
            elif not line.lstrip().startswith(mark):
                break  # the header is the file's first comment block
            elif "why" in fields:
                fields["why"] += " " + line.lstrip()[len(mark) :].strip()
        if "expect" not in fields or "problem" not in fields:
            raise ValueError(f"{path}: a corpus file must start with '// expect:' and '// problem:' lines")
        out.append(
            Hack(
                name=path.stem,
                device_dir=device_dir,
                path=str(path),
                source=text.replace("@REPO@", str(REPO)),
                expect=fields["expect"],
                problem=fields["problem"],
                needle=fields.get("needle", ""),
                min_ms=float(fields["min_ms"]) if "min_ms" in fields else None,
                why=fields.get("why", ""),
                expect_gpu=fields.get("expect_gpu", ""),
                needle_gpu=fields.get("needle_gpu", ""),
                reference=fields.get("reference", ""),
                margin=float(fields.get("margin", 0.0)),
                at_least=fields.get("at_least", ""),
                fails_only=fields.get("fails_only", ""),
                alternative=_alternative(path, fields.get("or", "")),
                ran=tuple(ran),
            )
        )
    return out
