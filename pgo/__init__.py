"""Worker side of the PGO release pipeline: one CLI whose subcommands are its phases."""

from pgo.errors import PipelineError

__all__ = ["PipelineError"]
