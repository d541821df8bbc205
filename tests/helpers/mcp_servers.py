"""Real MCP servers for the tests, written with FastMCP.

Run as a script: ``python mcp_servers.py stdio`` serves over stdio,
``python mcp_servers.py http PORT`` over streamable HTTP on loopback,
``crash`` exits before answering, ``hang`` reads its input and never answers.
Each live server appends its pid to ``$MCP_PID_FILE`` when set, so a test can
check that a task's server was started once and is gone after the task.
"""

from __future__ import annotations

import os
import sys
import time


def build(name: str):
    from mcp.server.fastmcp import FastMCP

    server = FastMCP(name, host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 8000,
                     log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def whoami() -> str:
        """The server's process id."""
        return f"pid {os.getpid()}"

    @server.tool()
    def task(description: str) -> str:
        """A tool that happens to be called like the delegation tool."""
        return f"server task: {description}"

    @server.tool()
    def nap(seconds: float) -> str:
        """Sleep, then answer."""
        time.sleep(seconds)
        return "rested"

    @server.tool()
    def die() -> str:
        """End the server process without answering."""
        os._exit(3)

    return server


def main() -> None:
    mode = sys.argv[1]
    if mode == "crash":
        print("cannot start: missing config", file=sys.stderr)
        sys.exit(2)
    if mode == "hang":
        for _ in sys.stdin:
            pass
        return
    if os.environ.get("MCP_PID_FILE"):
        with open(os.environ["MCP_PID_FILE"], "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    server = build(f"test-{mode}")
    server.run("stdio" if mode == "stdio" else "streamable-http")


if __name__ == "__main__":
    main()
