"""The sync agent: filesystem events -> quiet batches -> ``core.sync``; no UI imports.

    from ragtui.watch import WatchAgent

    agent = WatchAgent("docs", artifacts="/artifacts", embedder=embedder,
                       on_publish=lambda report: print(report.summary()))
    agent.start()          # returns at once; reconciles, then follows events
    agent.wait_idle(30)    # everything seen so far is searchable
    agent.stop()

``IndexFollower`` is the reader's side: it calls back when another process
publishes a new generation of an index. spec/watch.md is the full contract.
"""

from ragtui.watch.agent import AgentEvent, AgentStats, WatchAgent
from ragtui.watch.events import Batch, Change, ChangeBuffer, Scope, classify
from ragtui.watch.observers import Hooks, IndexFollower, make_observer

__all__ = [
    "AgentEvent",
    "AgentStats",
    "Batch",
    "Change",
    "ChangeBuffer",
    "Hooks",
    "IndexFollower",
    "Scope",
    "WatchAgent",
    "classify",
    "make_observer",
]
