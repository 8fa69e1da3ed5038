"""The agent runtime: Agent, LeadAgent, permissions, hooks, usage limits and events."""
