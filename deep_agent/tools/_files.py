"""``Read``, ``Write``, ``Edit`` and ``LS``: files in the workspace, with Claude Code's argument names.

Example::

    read, write, edit, ls = file_tools(Workspace("."))
    edit.invoke({"file_path": "app.py", "old_string": "x = 1", "new_string": "x = 2"})
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from deep_agent.tools._workspace import Workspace, check_text, is_folder, open_folder, open_regular, os_error, sendable
from subagents._transcripts import NOT_REGULAR

DEFAULT_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_LS_ENTRIES = 1000
MAX_READ_SCAN = 100_000_000  # characters one Read reads (shown or skipped): a huge file, or one endless line, stops
MAX_EDIT_BYTES = 20_000_000  # the largest file Edit rewrites: it holds the whole file in memory, twice


class ReadInput(BaseModel):
    file_path: str = Field(description="The file to read (absolute, or relative to the workspace).")
    offset: int | None = Field(default=None, ge=1, description="The line to start at (1-based).")
    limit: int | None = Field(default=None, ge=1, description="How many lines to read (default 2000).")


class WriteInput(BaseModel):
    file_path: str = Field(description="The file to write (created or overwritten).")
    content: str = Field(description="The whole new content of the file.")


class EditInput(BaseModel):
    file_path: str = Field(description="The file to modify.")
    old_string: str = Field(description="The exact text to replace.")
    new_string: str = Field(description="The text to replace it with (must differ).")
    replace_all: bool = Field(default=False, description="Replace every occurrence (default: exactly one).")


class LSInput(BaseModel):
    path: str | None = Field(default=None, description="The folder to list (default: the workspace).")


def file_tools(ws: Workspace) -> list[StructuredTool]:
    """The four file tools, bound to ``ws``."""

    def read(file_path: str, offset: int | None = None, limit: int | None = None) -> str:
        path = _existing_file(ws, file_path)
        start, count = (offset or 1) - 1, limit or DEFAULT_READ_LINES
        chosen: list[str] = []
        total = scanned = 0
        # Reading stops at MAX_READ_SCAN characters: a sparse file of gigabytes is one endless line.
        with _reading(file_path), open_regular(path, "r", within=ws, encoding="utf-8") as file:
            while len(chosen) < count and scanned <= MAX_READ_SCAN and (line := file.readline(MAX_LINE_CHARS + 1)):
                scanned += len(line)
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    while (rest := file.readline(65536)) and not rest.endswith("\n"):
                        scanned += len(rest)  # the rest of a long line is skipped, not kept
                        if scanned > MAX_READ_SCAN:
                            break
                if total >= start:
                    line = line.rstrip("\r\n")
                    chosen.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line truncated]")
                total += 1
        stopped = scanned > MAX_READ_SCAN
        note = (f"\n... [stopped reading after {MAX_READ_SCAN:,} characters, in line {total}: "
                "use Bash (head, tail, sed -n) on a file this big]") if stopped else ""
        if not chosen:
            return f"(no lines: {ws.shown(path)} has {total} line(s))" if not stopped else note.strip()
        numbered = (f"{start + i + 1:>6}\t{line}" for i, line in enumerate(chosen))
        return ws.bound("\n".join(numbered)) + note

    def write(file_path: str, content: str) -> str:
        path = ws.path(file_path)
        check_text(content, "content", nul=True)
        if path.is_dir():
            raise ToolException(f"file_path {file_path!r} is a directory")
        if path.exists() and not path.is_file():
            raise ToolException(f"file_path {file_path!r} {_NOT_REGULAR}")
        existed = path.exists()
        with open_regular(path, "w", within=ws, encoding="utf-8") as file:  # its folders made on the way
            file.write(content)
        return f"{'Overwrote' if existed else 'Created'} {ws.shown(path)} ({len(content)} characters)"

    def edit(file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        path = _existing_file(ws, file_path)
        if old_string == new_string:
            raise ToolException("old_string and new_string are the same: nothing to change")
        if old_string == "":
            raise ToolException("old_string is empty: give the exact text to replace")
        check_text(new_string, "new_string", nul=True)
        with _reading(file_path):
            # At most one byte past the bound: a file may grow as it is read.
            with open_regular(path, within=ws) as file:
                data = file.read(MAX_EDIT_BYTES + 1)
            if len(data) > MAX_EDIT_BYTES:
                raise ToolException(f"file_path {file_path!r} is over {MAX_EDIT_BYTES:,} bytes, more than Edit "
                                    "rewrites: use Bash (sed) on a file this big")
            text = str(data.decode("utf-8")).replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it
        count = text.count(old_string)
        if count == 0:
            raise ToolException(f"old_string was not found in {ws.shown(path)}")
        if count > 1 and not replace_all:
            raise ToolException(f"old_string occurs {count} times in {ws.shown(path)}: give more context to make "
                                "it unique, or pass replace_all=true")
        with open_regular(path, "w", within=ws, encoding="utf-8") as file:
            file.write(text.replace(old_string, new_string))
        return f"Edited {ws.shown(path)}: replaced {count if replace_all else 1} occurrence(s)"

    def ls(path: str | None = None) -> str:
        folder = ws.path(path, field="path")
        if not folder.is_dir():
            raise ToolException(f"path {path!r} is not a directory")
        fd = open_folder(ws, folder)  # reached without symlinks
        try:
            with os.scandir(fd) as found:
                entries = sorted((entry.name, is_folder(entry)) for entry in found)
        finally:
            os.close(fd)
        shown = [f"{name}/" if is_dir else name for name, is_dir in entries[:MAX_LS_ENTRIES]]
        if len(entries) > MAX_LS_ENTRIES:
            shown.append(f"... [{len(entries) - MAX_LS_ENTRIES} more entries]")
        return ws.bound(f"{ws.shown(folder)}/\n" + "\n".join(f"  {s}" for s in shown))

    return [
        _tool(ws, read, "Read", ReadInput, "Read a text file of the workspace, with line numbers."),
        _tool(ws, write, "Write", WriteInput, "Create or overwrite a file in the workspace."),
        _tool(ws, edit, "Edit", EditInput, "Replace exact text in a file of the workspace."),
        _tool(ws, ls, "LS", LSInput, "List a folder of the workspace."),
    ]


def _tool(ws: Workspace, func: Callable[..., str], name: str, schema: type[BaseModel],
          description: str) -> StructuredTool:
    """A tool whose every failure is a result the model reads, never an exception in the agent."""

    @functools.wraps(func)
    def guarded(**arguments: object) -> str:
        try:
            return sendable(func(**arguments))
        except ToolException as exc:
            raise ToolException(sendable(str(exc))) from None
        except OSError as exc:  # a name too long, a parent that is a file, no permission...
            raise os_error(exc, ws, f"{name} failed on") from None
        except (ValueError, RuntimeError) as exc:  # what the guards above did not foresee
            raise ToolException(f"{name} failed: {type(exc).__name__}: {exc}") from None
        except MemoryError:
            raise ToolException(f"{name} failed: out of memory (a file or output too big)") from None

    return StructuredTool.from_function(func=guarded, name=name, description=description, args_schema=schema,
                                        infer_schema=False, handle_tool_error=True)


def _existing_file(ws: Workspace, raw: str) -> Path:
    path = ws.path(raw)
    if not path.exists():
        raise ToolException(f"file_path {raw!r}: no such file in the workspace")
    if path.is_dir():
        raise ToolException(f"file_path {raw!r} is a directory (use LS)")
    if not path.is_file():
        raise ToolException(f"file_path {raw!r} {_NOT_REGULAR}")
    return path


_NOT_REGULAR = f"is {NOT_REGULAR}"


@contextlib.contextmanager
def _reading(raw: str) -> Iterator[None]:
    """A file that is not UTF-8 text or cannot be read, as an error naming it."""
    try:
        yield
    except UnicodeDecodeError:
        raise ToolException(f"file_path {raw!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ToolException(f"file_path {raw!r}: cannot be read ({exc.strerror or exc})") from None
