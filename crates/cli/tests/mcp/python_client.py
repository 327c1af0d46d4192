"""An independent MCP client (the Python `mcp` SDK) mounting `os mcp`: lists the tools, calls one,
has one refused, and prints what it saw as one JSON line for the Rust test to check.

Usage: python_client.py OS_BINARY  (OS_ENDPOINT and OS_TOKEN_FILE in the environment)
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(os_binary):
    env = {k: os.environ[k] for k in ("OS_ENDPOINT", "OS_TOKEN_FILE", "PATH")}
    params = StdioServerParameters(command=os_binary, args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            # The SDK validates structured content against each tool's outputSchema.
            context = await session.call_tool("read_context", {})
            emitted = await session.call_tool("emit", {"type": "demo.python"})
            refused = await session.call_tool("notes.view", {})
            print(json.dumps({
                "server": init.server_info.name,
                "tools": [t.name for t in tools],
                "read_only": {t.name: t.annotations.read_only_hint for t in tools},
                "context_error": context.is_error,
                "context_scope": (context.structured_content or {}).get("scope"),
                "emit_error": emitted.is_error,
                "refused_error": refused.is_error,
                "refused_text": refused.content[0].text,
            }))


asyncio.run(main(sys.argv[1]))
