"""Build-VM images with pinned compilers, their tests, and the compiler upgrade rollout."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Outside version control (.gitignore: /run/): images are large and rebuilt, not committed.
DEFAULT_IMAGES = REPO / "run" / "images"


class ImageError(Exception):
    """A failure the user can act on; the CLI prints it as one line and exits non-zero."""
