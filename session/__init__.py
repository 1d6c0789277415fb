"""Session layer: barge-in, tools, the conversation mirror, events for applications, the CLI."""
