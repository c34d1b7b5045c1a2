"""The Buildbot master side of the PGO release pipeline (see buildmaster/README.md).

Named apart from Buildbot's own `steps` module. settings.py uses the standard library only,
so that `./release` (launcher/) can read the settings and set up a master before Buildbot is
installed.
"""
