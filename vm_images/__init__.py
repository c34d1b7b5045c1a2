"""Build-VM images with pinned compilers, their tests, and the compiler upgrade rollout."""

from pgo import REPO, PipelineError

# Outside version control (.gitignore: /run/): images are large and rebuilt, not committed.
DEFAULT_IMAGES = REPO / "run" / "images"


class ImageError(PipelineError):
    """A failure of an image, its build, its checks or a rollout."""
