"""Tools: the Tool type, the ``@tool`` decorator and the built-in tools.

A :class:`Tool` is what an agent can call. :func:`tool` builds one from a typed Python
function; :func:`tools_file` gives the built-in file tools confined to one directory (and
:func:`tools_file_extra` four more: ``glob_files``, ``multi_edit``, ``todo_write``,
``notebook_edit``);
:func:`ask_user` / :func:`ask_user_tool` let a model ask a person a question;
:func:`tools_bash` gives a sandboxed shell (``bash``, ``bash_output``, ``kill_shell``);
:func:`tools_web` gives ``web_fetch`` and ``web_search`` (the ``web`` extra).
"""

from ._ask_user import ask_user, ask_user_tool
from ._bash import BashLimits, BashSandbox, BashTools, tools_bash
from ._bashrules import BashRules
from ._decorator import tool
from ._files import tools_file, tools_file_extra
from ._invoke import invoke_tool
from ._limits import FileToolLimits
from ._schema import schema_validator
from ._tool import Tool
from ._web import SearchBackend, SearchResult, WebLimits, WebRules, tools_web

# isort: split
# Building blocks of the agent runtime and the MCP adapter, importable from here so that
# they never reach into this package's private modules; not public API.
from ._decorator import struct_validator as struct_validator
from ._invoke import tool_validator as tool_validator
from ._schema import inline_refs as inline_refs
from ._tool import TOOL_NAME_PATTERN as TOOL_NAME_PATTERN

__all__ = [
    "BashLimits",
    "BashRules",
    "BashSandbox",
    "BashTools",
    "FileToolLimits",
    "SearchBackend",
    "SearchResult",
    "Tool",
    "WebLimits",
    "WebRules",
    "ask_user",
    "ask_user_tool",
    "invoke_tool",
    "schema_validator",
    "tool",
    "tools_bash",
    "tools_file",
    "tools_file_extra",
    "tools_web",
]
