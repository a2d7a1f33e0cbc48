"""A folder tree as data: every folder, file and link under a root, so a test can say exactly what an operation changed.

A file is recorded with its size, sha256 and mtime (a rewrite of the same bytes still shows); a link with its
target (never followed); a FIFO or other special file with its kind.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

Entry = tuple[str, ...]


def tree(root: Path) -> dict[str, Entry]:
    """`relative path -> what is there` for everything below root (links are not followed)."""
    found: dict[str, Entry] = {}
    for folder, folders, files in os.walk(root, followlinks=False):
        for name in folders + files:
            path = Path(folder) / name
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("folder",)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[relative] = ("file", str(info.st_size), digest, str(info.st_mtime_ns))
            else:
                found[relative] = ("special", oct(stat.S_IFMT(info.st_mode)))
    return found


def changes(before: dict[str, Entry], after: dict[str, Entry]) -> dict[str, list[str]]:
    """What differs: paths `added`, `removed` and `changed` (sorted), for one readable assert."""
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(p for p in set(before) & set(after) if before[p] != after[p]),
    }


NO_CHANGES: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}
