"""The permission ceiling of a delegation, computed in workflow code.

The same rule as in-process (``Permissions.ceiling``): the definition's mode (or the
lead's when it names none) must be reachable from the lead's mode, the definition's
``disallowed_tools`` join the lead's deny list, and the allow list and write root carry
over. Every subagent tool call is then checked against both the result and the lead's
permissions (in the tool activity), so a child can never do what its lead may not.
"""

from __future__ import annotations

from ._values import AgentSpec, PermissionSpec

__all__ = ["child_permissions"]


def child_permissions(lead: PermissionSpec, spec: AgentSpec) -> PermissionSpec:
    """The permissions ``spec``'s subagent runs under below a lead with ``lead``.

    Pure (the write root is carried, never resolved here), so it can run in a workflow.

    Args:
        lead: The lead's current permissions.
        spec: The delegated definition.

    Returns:
        The child's permissions: its mode, the lead's deny list plus the definition's
        ``disallowed_tools``, the lead's allow list, write root and ``can_use_tool``.

    Raises:
        PermissionCeilingError: The definition's mode is wider than the lead allows.
    """
    ceiling = lead.checkable().ceiling(spec.permission_mode, spec.disallowed_tools)
    return PermissionSpec(
        mode=ceiling.mode,
        allow=tuple(sorted(ceiling.allow)),
        deny=tuple(sorted(ceiling.deny)),
        write_root=lead.write_root,
        can_use_tool=lead.can_use_tool,  # the ceiling keeps the callback, as in-process
    )
