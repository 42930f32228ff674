"""The actors a host runs, one module per role: the four LLM roles (`llm_roles`: planner,
executor, fixer, summarizer), the profiler around a hardware agent (`profiler`), the memory
curator and retriever (`curator`, `retriever`) and the coordinator's actor shell around
`accelopt.coordinator.CoordinatorCore` (`coordinator`).

Imports `llm/` and `base/`, never `runtime/`; imported by `runtime/` (which builds them by
role: `runtime.hosting.actor_class`) and by `cli/` only for the profiler's kernel helpers
(`accelopt remeasure`)."""
