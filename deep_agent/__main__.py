"""``python -m deep_agent``: the offline demo; with arguments, the ``deep-agent`` command line."""
import sys

if len(sys.argv) > 1:  # `python -m deep_agent run ...` is `deep-agent run ...`, `--help` included
    from deep_agent.cli.app import main

    raise SystemExit(main())

from deep_agent.demo import main as demo

raise SystemExit(demo())
