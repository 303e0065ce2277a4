"""The learner keeps freed tensor memory in glibc's heap (`marl.learners.memory`): big minibatch tensors reuse pages.

Each case runs in a fresh process (the setting is process-wide): six 8 MB tensors alive together, freed, ten times,
as a minibatch's activations are. With glibc's defaults every cycle faults its 12,288 pages in again; kept, almost none.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

SCRIPT = """
import json, resource, sys, torch
kept = None
if sys.argv[1] == "1":  # (importing marl alone may already raise glibc's dynamic threshold: the yardstick does not)
    from marl.learners.memory import keep_freed_memory
    kept = keep_freed_memory()
def cycle(i):  # sizes that grow a little, as minibatches and layers differ: glibc's dynamic threshold never catches up
    alive = [torch.empty((2 << 20) + i * 4096).fill_(1.0) for _ in range(6)]
    del alive
cycle(0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(1, 11):
    cycle(i)
print(json.dumps({"kept": kept, "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10}))
"""
PAGES = 6 * 8 * 256  # 4 KB pages touched per cycle


def faults(keep: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, "1" if keep else "0"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's heap only")
def test_kept_heap_reuses_pages_that_glibc_defaults_fault_in_again():
    default, kept = faults(False), faults(True)
    assert default["faults"] > PAGES / 2, default  # the yardstick: fresh pages every cycle
    assert kept["kept"] is True and kept["faults"] < PAGES / 8, kept

