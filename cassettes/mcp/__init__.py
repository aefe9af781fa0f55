"""``looptap mcp``: the MCP server (``server``), its stdio transport (``stdio``) and the queries it
answers over a root of runs (``query``), in bounded safe JSON (``answers``) with recorded parts
(``recorded``)."""
