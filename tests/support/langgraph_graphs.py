"""The LangGraph graphs our LangGraph tests run: no network, scripted models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt


@tool
def weather(city: str) -> str:
    """The weather in a city; asks a human first (an interrupt)."""
    answer = interrupt(f"look up the weather in {city}?")
    return f"{city}: sunny ({answer})"


def script() -> Iterator[AIMessage]:
    """The chat model's replies: a tool call, then numbered answers for ever."""
    yield AIMessage(
        "",
        tool_calls=[
            {"name": "weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}
        ],
    )
    n = 0
    while True:
        n += 1
        yield AIMessage(f"answer {n}")


def agent_graph(checkpointer: Any) -> Any:
    """StateGraph over MessagesState: a scripted chat model and a tool node."""
    model = GenericFakeChatModel(messages=script())

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def echo_graph(checkpointer: Any) -> Any:
    """StateGraph over MessagesState whose one node echoes the last message."""

    def echo(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=checkpointer)


def shape(messages: list[BaseMessage]) -> list[tuple[str, Any, list[str]]]:
    """What a conversation says, without the ids LangGraph makes up per run."""
    return [
        (m.type, m.content, [c["name"] for c in getattr(m, "tool_calls", [])]) for m in messages
    ]
