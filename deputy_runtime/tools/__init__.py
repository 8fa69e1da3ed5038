"""Tools: the Tool type, the @tool decorator and the built-in tools."""

from ._tool import Tool

__all__ = ["Tool"]
