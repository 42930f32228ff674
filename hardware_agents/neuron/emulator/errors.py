"""The errors a kernel sees from the emulator: the NKI compiler's and runtime's, by their
documented names (the `nki.errors` reference), and `NotEmulated` for an API the emulator
does not implement (never a silent wrong answer)."""

from __future__ import annotations

ERRORS_DOC = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/nki/api/nki.errors.html"


class NKIError(Exception):
    """An error the NKI toolchain raises; `name` is its `nki.errors` entry (or ours)."""

    phase = "compile"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message

    def __str__(self) -> str:
        link = f" (see {ERRORS_DOC}#nki-errors-{self.name})" if self.name.startswith("err_") else ""
        return f"[NKI] {self.name}: {self.message}{link}"


class NKICompileError(NKIError):
    """Raised while tracing (compiling) a kernel: the kernel never runs."""


class NKIRuntimeError(NKIError):
    """Raised while executing a compiled kernel."""

    phase = "run"


class OneZeroFlagError(NKIRuntimeError):
    """An `nc_matmul` told the Tensor Engine an operand holds only 0s and 1s (which prices it at
    half the cycles) and the operand held something else: the hardware would compute garbage,
    so the kernel is wrong (the agent's verdict is `incorrect`)."""

    def __init__(self, role: str, value: float) -> None:
        super().__init__(
            "err_false_onezero_flag",
            f"nc_matmul's {role} operand was declared made of 0s and 1s (is_stationary_onezero, "
            f"is_moving_onezero or is_transpose's identity) but holds {value!r}: the flag halves the "
            "Tensor Engine's work only for such an operand, on any other the hardware computes garbage",
        )


class NotEmulated(NKICompileError):
    """An NKI API (or a use of one) that the emulator does not implement."""

    def __init__(self, api: str, detail: str = "") -> None:
        super().__init__(
            "not_emulated",
            f"{api} is not emulated by AccelOpt's NKI emulator"
            + (f" ({detail})" if detail else "")
            + "; rewrite the kernel with the emulated APIs (docs/neuron.md lists them)",
        )
        self.api = api


def compile_error(name: str, message: str) -> NKICompileError:
    return NKICompileError(name, message)


__all__ = [
    "ERRORS_DOC",
    "NKICompileError",
    "NKIError",
    "NKIRuntimeError",
    "NotEmulated",
    "OneZeroFlagError",
    "compile_error",
]
