"""``python -m deep_agent``: the offline demo; with arguments, the ``deep-agent`` command line."""
import os
import sys

# `python -m` puts the folder it starts in (the workspace) first on the import path: a module the program imports
# later (an installed package's optional one: brotli, socks) would be the workspace's. The package is installed.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

if len(sys.argv) > 1:  # `python -m deep_agent run ...` is `deep-agent run ...`, `--help` included
    from deep_agent.cli._app import main

    raise SystemExit(main())

from deep_agent._demo import main as demo

raise SystemExit(demo())
