"""Tools: the Tool type, the @tool decorator and the built-in tools."""

from ._ask_user import ask_user, ask_user_tool
from ._decorator import struct_validator, tool
from ._files import tools_file
from ._invoke import invoke_tool, tool_validator
from ._tool import Tool

__all__ = [
    "Tool",
    "ask_user",
    "ask_user_tool",
    "invoke_tool",
    "struct_validator",
    "tool",
    "tool_validator",
    "tools_file",
]
