"""The one rule that names a kernel: its id is a hash of what it is (docs/architecture.md,
"Kernel ids").

`kernel_id(problem, language, source)` is SHA-256 over a domain tag and the three fields,
each as its exact UTF-8 bytes behind its length, cut to 32 hex digits (128 bits, the width
of every other id of the log). Nothing is normalised: two sources that differ in one byte
(whitespace, a comment, line endings) are two kernels, because whatever a normalisation
merged could compile or run differently (indentation is syntax in NKI and Triton, a
backslash-newline or a string literal is code in C), and a dataset joined on ids must get
back exactly the text that was compiled and timed. The problem's name is hashed because a
kernel is a solution of one problem (the same file is checked and timed against another
reference, at other shapes, for another problem; and one run's kernels of several problems
share one table), and the language because one text may be read as two (a C and an NKI
kernel never share an id, whatever their bytes). No device: the same kernel timed on two
devices is one kernel with two profiles.
"""

from __future__ import annotations

import hashlib

DOMAIN = b"accelopt-kernel-id-1\x00"
ID_HEX = 32


def kernel_id(problem: str, language: str, source: str) -> str:
    """The content id of `source`, a kernel in `language` for `problem`: 32 lowercase hex."""
    h = hashlib.sha256(DOMAIN)
    for part in (problem, language, source):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:ID_HEX]
