"""The actors: everything that runs while a run runs, grouped by job and layered top-down
(tests/test_layers.py checks):

- `runtime/`: starts, hosts and attaches to the actors (the session, pools, Ray deployment);
- `roles/`: the actors a host runs (the four LLM roles, profiler, memory curator and
  retriever, the coordinator's shell);
- `llm/`: the model plumbing (gateway, prices, preflight, the offline tuner model, reply
  parsing, a local LLM);
- `base/`: what every work-consuming actor is built on (the worker loop, run context,
  recordings of a parent run).

A group imports only groups below it; only `cli/` imports actors. Nothing is imported here,
so importing one group never loads another."""
