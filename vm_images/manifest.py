"""Compare two builds by their manifests: did the same definition give the same image?"""

import json
from pathlib import Path

from vm_images import ImageError
from vm_images.store import MANIFEST, read_json


def load_manifest(name, store):
    """A manifest named by a path to manifest.json, or by IMAGE or IMAGE/BUILD in the store."""
    path = Path(name)
    if path.name == MANIFEST or path.is_file():
        return read_json(path, "image manifest")
    return store.build(name).manifest


def diff(a, b):
    """One line per difference; empty when packages, worker stack, compiler and definition agree."""
    if not isinstance(a.get("packages"), dict) or not isinstance(b.get("packages"), dict):
        raise ImageError("a manifest without a package list cannot be compared")
    label_a, label_b = f"{a['image']}/{a['build']}", f"{b['image']}/{b['build']}"
    lines = []
    for key, what in (("packages", "package"), ("python_packages", "python package")):
        old, new = a.get(key, {}), b.get(key, {})
        for name in sorted(set(old) | set(new)):
            if name not in new:
                lines.append(f"- {what} {name} {old[name]} (only in {label_a})")
            elif name not in old:
                lines.append(f"+ {what} {name} {new[name]} (only in {label_b})")
            elif old[name] != new[name]:
                lines.append(f"~ {what} {name} {old[name]} -> {new[name]}")
    old_def, new_def = a["definition"], b["definition"]
    for key in sorted(set(old_def) | set(new_def)):
        if key in ("name", "packages"):
            continue
        if old_def.get(key) != new_def.get(key):
            lines.append(f"~ definition {key}: {compact(old_def.get(key))} -> {compact(new_def.get(key))}")
    return lines


def compact(value):
    return json.dumps(value, sort_keys=True)
