"""Agent definitions: the AgentDefinition value and its YAML and markdown files."""
