"""Reading back the scalars of TensorBoard event files (what `tensorboard --logdir` shows).

The files are TFRecord streams of `Event` protobufs: each record is an
8-byte length, a 4-byte CRC of it, the payload and a 4-byte CRC of that.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path


def event_files(run_dir: str | os.PathLike) -> list[Path]:
    return sorted(Path(run_dir).glob("events.out.tfevents.*"))


def read_scalars(run_dir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value), ...] over every event file of a run directory, in file order."""
    from tensorboardX.proto.event_pb2 import Event

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in event_files(run_dir):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            payload = data[pos + 12 : pos + 12 + length]
            if len(payload) < length:
                break  # a record still being written
            pos += 12 + length + 4
            event = Event.FromString(payload)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, []).append((int(event.step), float(value.simple_value)))
    return scalars
