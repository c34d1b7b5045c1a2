"""The one way this repository reads its TOML and JSON files: the data, or one line that says which
file could not be read and why, raised as the calling room's error (pgo's PipelineError by default,
the VM images' ImageError, the master's SettingsError)."""

import json
import tomllib
from pathlib import Path
from typing import Any

from pgo.base.errors import PipelineError


def read_toml(path: Path | str, what: str, error: type[Exception] = PipelineError) -> dict[str, Any]:
    """A TOML file's tables; error("cannot read WHAT PATH: why") when it is missing or not TOML."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise error(f"cannot read {what} {path}: {e}") from None


def read_json(path: Path | str, what: str, error: type[Exception] = PipelineError) -> Any:
    """A JSON file's data; error("WHAT PATH is missing"), or ("cannot read WHAT PATH: why")."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{what} {path} is missing") from None
    except (OSError, ValueError) as e:
        raise error(f"cannot read {what} {path}: {e}") from None
