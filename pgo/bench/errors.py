"""The two ways a benchmark can fail before it has a verdict; each maps to an exit code."""

from pgo import PipelineError


class UsageError(PipelineError):
    """The command line or its inputs are wrong (exit 2)."""
    exit_code = 2


class InfraError(PipelineError):
    """The benchmark could not run: a server did not start, sysbench failed (exit 3)."""
    exit_code = 3
