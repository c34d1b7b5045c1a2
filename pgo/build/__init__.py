"""The pipeline: the source, the phases that build, train, check, BOLT and test, and the commands
around them (resume, configure-check, build-deps); the profile's reuse from the archive."""
