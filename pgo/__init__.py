"""Worker side of the PGO release pipeline: one CLI whose subcommands are its phases."""

from pathlib import Path

from pgo.base.errors import PipelineError

# The checkout every program of this repository runs from: pgo/, buildmaster/, vm_images/, packaging/.
REPO = Path(__file__).resolve().parent.parent

__all__ = ["REPO", "PipelineError"]
