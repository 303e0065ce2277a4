"""Keep freed tensor memory in the process (glibc's malloc) instead of handing it back to the kernel.

A PPO minibatch of 24,576 rows allocates dozens of fresh 6 MB activations and gradients per SGD
step. glibc serves blocks above its mmap threshold (128 KB, raised dynamically only up to the
largest block freed so far) with a fresh mmap, and returns them on free: every step then pays a
page fault per 4 KB page and the kernel's zeroing of it, about 2,400-4,500 minor faults per step on
simple_spread at 1,024 worlds. Raising the mmap and trim thresholds keeps those blocks in the heap
for reuse: a few faults per update instead of 10k-84k, and 6-11 % less CPU time per PPO update
(benchmarks/speed/learner_throughput.py,
`--alloc-ab`). The cost is that the process keeps its peak heap instead of shrinking after it.
Other C libraries (macOS, musl) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 256 << 20  # blocks below this come from the heap (and go back to it)
TRIM_THRESHOLD = 1 << 30  # free heap top kept before trimming it back to the kernel
TOP_PAD = 64 << 20  # extra heap requested at each growth

_done = False


def keep_freed_memory() -> bool:
    """Raise glibc's thresholds once per process; False where the C library is not glibc (nothing changed)."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version  # only glibc has it (and mallopt's parameters above)
    except (OSError, AttributeError, TypeError):
        return False
    _done = all(libc.mallopt(param, value) == 1 for param, value in (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))
    return _done
