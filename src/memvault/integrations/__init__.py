"""Framework adapters: memvault as the memory of agent frameworks.

Each adapter lives in its own module and needs its framework, installed by an
optional extra; importing a module without it raises
:class:`~memvault.errors.ConfigurationError` naming the extra:

- :mod:`memvault.integrations.openai_agents`: ``MemvaultSession``, an OpenAI Agents
  SDK session (``pip install 'memvault[openai-agents]'``).
- :mod:`memvault.integrations.langchain`: ``MemvaultChatMessageHistory``, a
  LangChain chat message history (``pip install 'memvault[langchain]'``).
- :mod:`memvault.integrations.langgraph`: ``MemvaultSaver``, a LangGraph
  checkpointer (``pip install 'memvault[langgraph]'``): a thread is a session whose
  nodes are checkpoints and writes (see :mod:`memvault.integrations._langgraph_log`).
- :mod:`memvault.integrations.mcp`: an MCP server (``memvault mcp``, registered by
  :mod:`memvault.integrations.mcp_command`) whose tools append, read, search,
  summarize, snapshot and roll back sessions (``pip install 'memvault[mcp]'``).

The first two store each framework object as one memvault :class:`~memvault.Message`: a
native view (role, text, tool calls) that memvault's own tools and the other
adapter can read, plus the untouched object as JSON in ``metadata``, which is what
the adapter returns, so it comes back exactly as it was added.
"""
