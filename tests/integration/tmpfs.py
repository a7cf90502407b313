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


def fill(folder, leave):
    """Fill folder's file system up to `leave` bytes free (a file named
    filler; remove it to make room again)."""
    st = os.statvfs(folder)
    want = max(0, st.f_bavail * st.f_frsize - leave)
    chunk = b"\0" * (1 << 16)
    # unbuffered: a buffered file would fail again when closed
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as fh:
        try:
            while want > 0:
                want -= fh.write(chunk[:min(len(chunk), want)])
        except OSError:
            pass    # full: what leave=0 asks for


def umount(path):
    """Unmount path if it is a mount point (lazily when it is busy)."""
    if os.path.ismount(path):
        if subprocess.run(["umount", path]).returncode != 0:
            subprocess.run(["umount", "-l", path])
