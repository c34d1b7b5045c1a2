"""The Buildbot master side of the PGO release pipeline (see steps/README.md).

settings.py and local.py use the standard library only, so that `./release`
can read the settings and set up a master before Buildbot is installed.
"""
