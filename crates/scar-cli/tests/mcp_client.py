"""Drives `scar mcp` with the official MCP Python SDK, as an assistant would: starts it over
stdio, initialises, lists the tools and resources, calls `search`, reads the first index, and
prints what came back as one JSON object.

    python mcp_client.py SCAR_BINARY INDEX_DIR QUESTION
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    scar, index, question = sys.argv[1:4]
    server = StdioServerParameters(command=scar, args=["--index", index, "mcp"], env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = await session.list_tools()
            found = await session.call_tool("search", {"question": question, "k": 2})
            resources = await session.list_resources()
            contents = await session.read_resource(resources.resources[0].uri)
    print(json.dumps({
        "server": initialized.server_info.name,
        "protocol": initialized.protocol_version,
        "tools": [tool.name for tool in tools.tools],
        "search_error": found.is_error,
        "search_text": found.content[0].text,
        "search_report": found.structured_content,
        "resources": [str(resource.uri) for resource in resources.resources],
        "resource_text": contents.contents[0].text,
    }))


asyncio.run(main())
