"""A small tmpfs for disk-full tests (mounting needs root)."""

import os
import subprocess


def mount(path, size):
    """Mount a tmpfs of size bytes at path (made if missing). Returns ""
    on success, else why it failed."""
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size,
                        "tmpfs", path], capture_output=True, text=True)
    return "" if r.returncode == 0 else (r.stderr.strip() or "mount failed")


def umount(path):
    """Unmount path if it is a mount point (lazily when it is busy)."""
    if os.path.ismount(path):
        if subprocess.run(["umount", path]).returncode != 0:
            subprocess.run(["umount", "-l", path])
