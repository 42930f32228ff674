"""Buffers the trusted side owns and the kernel's child only maps: where a profile's inputs
and outputs live when the judge compares in place (`device_judge.py`).

The agent lays out one region per profile (`layout`): every correctness case's inputs and
outputs, each between two guard zones of the dtype's poison, and, for the timing rounds,
one output slot per kept call. It writes the inputs and poisons the rest itself, keeps the
pristine inputs in its own memory, and hands the child a `BufferHandle`; the child maps the
region (`open_buffers`) and wraps each slot as a tensor. The judge then reads the outputs,
the guards and the inputs through its own mapping while the child is held stopped (the
freeze proves nothing of the child ran while it read) or after it has exited; nothing the
child reports about them is believed. References never enter the region: they stay in the
judge's memory (`device_judge.JudgeData`), which the child has no handle to.

Two implementations of the trusted side:
- `SharedMemoryBuffers` (CPU tensors: the interpreter): a sealed memfd (`sandbox/shm.py`),
  inherited by the child under the same fd number (`pass_fds`); sealed against shrinking
  and growing, so the child cannot make the judge's reads fault;
- `CudaIpcBuffers` (a GPU): one allocation of the judge's CUDA context, handed over as a
  CUDA IPC handle; the child opens it with `cudaIpcOpenMemHandle`. WRITTEN BUT ONLY
  EXERCISED ON A GPU (`scripts/gpu_check.py`'s `judge_buffers_ipc` row): nothing of it runs
  in this project's tests, which have no GPU.
"""

from __future__ import annotations

import ctypes
import math
import mmap
from typing import Any

import torch

from hardware_agents.triton.inputs import TORCH_DTYPES
from hardware_agents.triton.records import BufferHandle, BufferSlot, CudaIpc

GUARD_BYTES = 4096  # each side of a guarded slot (a multiple of every dtype's size)
ALIGN = 256  # every slot's data and guards start at a multiple of this


def poison_value(dtype: torch.dtype) -> Any:
    """What an unwritten output and a guard zone hold: NaN (floats), True (bool), the type's
    minimum (integers)."""
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min


def layout(tensors: list[tuple[str, str, list[int], bool]]) -> tuple[list[BufferSlot], int]:
    """Slots for (name, dtype, shape, guarded) in order, and the region's size in bytes."""
    slots, pos = [], 0
    for name, dtype, shape, guarded in tensors:
        guard = GUARD_BYTES if guarded else 0
        item = TORCH_DTYPES[dtype].itemsize
        nbytes = math.prod(shape) * item
        pos += guard
        slots.append(BufferSlot(name=name, dtype=dtype, shape=list(shape), offset=pos, guard=guard))
        pos = _align(pos + nbytes) + guard
        pos = _align(pos)
    return slots, max(pos, ALIGN)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def nbytes(slot: BufferSlot) -> int:
    return math.prod(slot.shape) * TORCH_DTYPES[slot.dtype].itemsize


def _words(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as the widest integers that tile them (a bitwise comparison
    in a fraction of the elements: 4 MB in 12 ms as int64, 22 ms as bytes, on this loaded host)."""
    b = t.reshape(-1).view(torch.uint8)
    for dt, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if b.numel() % size == 0 and b.data_ptr() % size == 0:
            return b.view(dt)
    return b


def _views(base: torch.Tensor, slot: BufferSlot) -> torch.Tensor:
    dt = TORCH_DTYPES[slot.dtype]
    return base[slot.offset : slot.offset + nbytes(slot)].view(dt).view(slot.shape)


class JudgeBuffers:
    """The trusted side's region (see the module doc): views of every slot, its guards, and
    the checks the judge makes of them. Subclasses allocate `base` and say how the child
    reaches it (`handle`, `pass_fds`)."""

    handle: BufferHandle
    base: torch.Tensor  # uint8, the whole region, the judge's own mapping

    def _init_slots(self) -> None:
        self._slots = {s.name: s for s in self.handle.slots}
        self._view_of: dict[str, torch.Tensor] = {}
        self._pristine_guard: dict[str, torch.Tensor] = {}
        for s in self.handle.slots:
            if s.guard:
                dt = TORCH_DTYPES[s.dtype]
                if s.dtype not in self._pristine_guard:
                    item = dt.itemsize
                    pattern = torch.full(
                        (s.guard // item,), poison_value(dt), dtype=dt, device=self.base.device
                    )
                    self._pristine_guard[s.dtype] = pattern.view(torch.uint8)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """File descriptors the child must inherit (same numbers) to map the region."""
        return ()

    def view(self, name: str) -> torch.Tensor:
        """The slot as a tensor of its dtype and shape (a view of the judge's mapping)."""
        v = self._view_of.get(name)
        if v is None:
            v = self._view_of[name] = _views(self.base, self._slots[name])
        return v

    def guards(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        s = self._slots[name]
        lo, hi = s.offset, s.offset + nbytes(s)
        return self.base[lo - s.guard : lo], self.base[hi : hi + s.guard]

    def poison(self, name: str) -> None:
        """The slot and its guards filled with the dtype's poison."""
        s = self._slots[name]
        self.view(name).fill_(poison_value(TORCH_DTYPES[s.dtype]))
        self._poison_guards(s)

    def _poison_guards(self, s: BufferSlot) -> None:
        if s.guard:
            pattern = self._pristine_guard[s.dtype]
            for g in self.guards(s.name):
                g.copy_(pattern)

    def write(self, name: str, value: torch.Tensor) -> None:
        """The slot set to `value` (an input), its guards poisoned."""
        self._poison_guards(self._slots[name])
        self.view(name).copy_(value)

    def guards_intact(self, name: str) -> bool:
        """Whether both guard zones still hold the poison, byte for byte, as the judge wrote it
        (the pattern is the judge's, never read back from the region)."""
        s = self._slots[name]
        if not s.guard:
            return True
        pattern = self._pristine_guard[s.dtype]
        return all(torch.equal(g, pattern) for g in self.guards(name))

    def unchanged(self, name: str, pristine: torch.Tensor) -> bool:
        """Whether the slot still holds `pristine` (the judge's own copy of what it wrote),
        byte for byte, and its guards their poison."""
        got = self.view(name)
        same = got.shape == pristine.shape and torch.equal(_words(got), _words(pristine.contiguous()))
        return same and self.guards_intact(name)

    def close(self) -> None:
        """Drop the judge's handle on the region (its views keep the mapping alive)."""


class SharedMemoryBuffers(JudgeBuffers):
    """The region as a sealed memfd of the judge's (CPU tensors); the child inherits the fd."""

    def __init__(self, slots: list[BufferSlot], size: int, name: str = "accelopt-judge") -> None:
        from hardware_agents.sandbox import SharedRegion

        self._region = SharedRegion(size, name, child_readonly=False)
        self.base = torch.frombuffer(self._region.mm, dtype=torch.uint8, count=size)
        self.handle = BufferHandle(kind="shared_memory", size=size, slots=slots, fd=self._region.fd)
        self._init_slots()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._region.fd,) if self._region.fd >= 0 else ()

    def close(self) -> None:
        self._region.close()


class CudaIpcBuffers(JudgeBuffers):
    """The region as one allocation of the judge's CUDA context, handed over as a CUDA IPC
    handle. Only exercised on a GPU (`scripts/gpu_check.py`); the judge's process must stay
    alive, holding `base`, for as long as the child uses it."""

    def __init__(
        self, slots: list[BufferSlot], size: int, device: torch.device, child_device: int = 0
    ) -> None:
        self.base = torch.empty(size, dtype=torch.uint8, device=device)
        shared = self.base.untyped_storage()._share_cuda_()
        handle, offset = shared[1], shared[3]  # the allocation's IPC handle, the storage's offset in it
        self.handle = BufferHandle(
            kind="cuda_ipc",
            size=size,
            slots=slots,
            ipc=CudaIpc(handle=bytes(handle), offset=int(offset), device=child_device),
        )
        self._init_slots()


class OpenedBuffers:
    """The child's side: the region mapped, each slot a tensor (`view`)."""

    def __init__(self, handle: BufferHandle, base: torch.Tensor, keep: object = None) -> None:
        self.handle, self.base, self._keep = handle, base, keep
        self._slots = {s.name: s for s in handle.slots}

    def view(self, name: str) -> torch.Tensor:
        return _views(self.base, self._slots[name])

    def has(self, name: str) -> bool:
        return name in self._slots


def open_buffers(handle: BufferHandle) -> OpenedBuffers:
    """Map the judge's region in the child (the harness, before the solution is imported)."""
    if handle.kind == "shared_memory":
        mm = mmap.mmap(handle.fd, handle.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        return OpenedBuffers(handle, torch.frombuffer(mm, dtype=torch.uint8, count=handle.size), mm)
    assert handle.ipc is not None
    return _open_cuda_ipc(handle, handle.ipc)


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _DeviceArray:
    """A device pointer as `__cuda_array_interface__` (torch wraps it without owning it)."""

    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
        }


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime torch has loaded (opened by its name: the library already in the process)."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("no CUDA runtime library found to open a CUDA IPC handle")


def _open_cuda_ipc(handle: BufferHandle, ipc: CudaIpc) -> OpenedBuffers:
    """GPU only (see the module doc): cudaIpcOpenMemHandle, then the region wrapped."""
    torch.cuda.set_device(ipc.device)
    torch.cuda.init()
    rt = _cudart()
    h = _IpcHandle()
    ctypes.memmove(ctypes.byref(h), ipc.handle, 64)
    ptr = ctypes.c_void_p()
    rc = rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), h, ctypes.c_uint(1))  # cudaIpcMemLazyEnablePeerAccess
    if rc != 0 or not ptr.value:
        raise OSError(f"cudaIpcOpenMemHandle failed (cudaError {rc})")
    arr = _DeviceArray(ptr.value + ipc.offset, handle.size)
    base = torch.as_tensor(arr, device=f"cuda:{ipc.device}")
    return OpenedBuffers(handle, base, arr)


__all__ = [
    "GUARD_BYTES",
    "CudaIpcBuffers",
    "JudgeBuffers",
    "OpenedBuffers",
    "SharedMemoryBuffers",
    "layout",
    "nbytes",
    "open_buffers",
    "poison_value",
]
