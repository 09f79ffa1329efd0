"""A disk that fills up: a writer (``os.write``'s shape) that takes ``room`` bytes, then
raises ENOSPC — injected where servelab writes, so a test sees a full disk mid-run."""

import errno
import os


def filling_disk(room: int):
    left = [room]

    def write(fd: int, data) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(len(data), left[0])
        left[0] -= n
        return os.write(fd, bytes(data[:n]))

    return write
