"""SHA-256 of a file, and sha256sums.txt of a folder of artifacts, in the format `sha256sum -c` reads."""

import hashlib
from pathlib import Path

SUMS = "sha256sums.txt"


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sha256sums(folder, known=None):
    """sha256sums.txt over every file below folder; returns how many files it lists. known: {relative path:
    sha256} of files the caller hashed already (and did not change since), not read again."""
    folder = Path(folder)
    known = known or {}
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p != folder / SUMS)
    lines = [f"{known.get(str(p.relative_to(folder))) or sha256_file(p)}  {p.relative_to(folder)}\n" for p in files]
    (folder / SUMS).write_text("".join(lines))
    return len(files)


def verify_sha256sums(folder):
    """The names of the files whose checksum does not match, or that are missing or not listed."""
    folder = Path(folder)
    listed = {}
    for line in (folder / SUMS).read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p != folder / SUMS}
    bad = sorted(present ^ set(listed))
    bad += sorted(n for n in present & set(listed) if sha256_file(folder / n) != listed[n])
    return bad
