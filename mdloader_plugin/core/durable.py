"""Files that survive a crash: written whole or not at all, on disk before they count.

A rename (``os.replace``) is atomic, but without ``fsync`` the new name can reach the disk before
the data it points at: after a power loss or a node crash the file exists, complete in name and
empty or truncated in content. So what marks something done (a conversion's part, its plan, the
output) is renamed only once its contents are flushed (:func:`fsync_tree`), and the folder that
holds the new name is flushed after the rename (:func:`fsync_dir`).
"""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    """Flush the entries of the folder `path` (a rename or a file created in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """Flush the contents of the file `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str) -> None:
    """Flush `path`: a file, or a folder with every file and folder under it (deepest first)."""
    if not os.path.isdir(path):
        fsync_file(path)
        return
    for folder, _, files in os.walk(path, topdown=False):
        for name in files:
            fsync_file(os.path.join(folder, name))
        fsync_dir(folder)


def replace(src: str, dst: str) -> None:
    """Rename `src` (a file or folder, its contents flushed first) to `dst`, and flush the
    folder that holds `dst`: after this returns, `dst` is on disk, whole."""
    fsync_tree(src)
    os.replace(src, dst)
    fsync_dir(os.path.dirname(os.path.abspath(dst)))


def write_text(path: str, text: str) -> None:
    """Write `path` atomically and durably (a temporary file, flushed, renamed)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
