"""MCP both ways: the sandbox as an MCP server (`server`) and MCP servers as outbound tools (`client`)."""
