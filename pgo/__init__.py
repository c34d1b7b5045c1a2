"""Worker side of the PGO release pipeline: one CLI whose subcommands are its phases."""


class PipelineError(Exception):
    """A failure the user can act on; the CLI prints it as one line and exits non-zero."""
