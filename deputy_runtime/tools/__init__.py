"""Tools: the Tool type, the @tool decorator and the built-in tools."""

from ._ask_user import ask_user, ask_user_tool
from ._decorator import tool
from ._files import tools_file
from ._invoke import invoke_tool
from ._limits import FileToolLimits
from ._tool import Tool

__all__ = [
    "FileToolLimits",
    "Tool",
    "ask_user",
    "ask_user_tool",
    "invoke_tool",
    "tool",
    "tools_file",
]
