"""Tools: the Tool type, the ``@tool`` decorator and the built-in tools.

A :class:`Tool` is what an agent can call. :func:`tool` builds one from a typed Python
function; :func:`tools_file` gives the built-in file tools confined to one directory;
:func:`ask_user` / :func:`ask_user_tool` let a model ask a person a question.
"""

from ._ask_user import ask_user, ask_user_tool
from ._decorator import tool
from ._files import tools_file
from ._invoke import invoke_tool
from ._limits import FileToolLimits
from ._schema import schema_validator
from ._tool import Tool

# isort: split
# A building block of the agent runtime (deputy_runtime.runtime), importable from here so
# that the runtime never reaches into this package's private modules; not public API.
from ._invoke import tool_validator as tool_validator

__all__ = [
    "FileToolLimits",
    "Tool",
    "ask_user",
    "ask_user_tool",
    "invoke_tool",
    "schema_validator",
    "tool",
    "tools_file",
]
