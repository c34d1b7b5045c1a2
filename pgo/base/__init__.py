"""The base every other part stands on: errors, atomic writes, processes, the records and names the
worker, the master and the VM images share (protocol), the platforms, the lines the CLI prints."""
