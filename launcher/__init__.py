"""`./release`: a local Buildbot master and worker, set up, started and driven through the master's
REST API (local.py). A client of the master, not its configuration: it imports the master's
settings (buildmaster/settings.py, standard library only) and never Buildbot.
"""
