"""Starting and hosting the actors: one run from start to finish (`session`), a warm pool of
agents shared by runs (`pool`), the Ray deployment of a run's actors (`deployment`), the
generic Ray host that builds any actor of a role (`hosting`: `actor_class` is the table of
the roles a host runs) and the run's coordinator as the session sees it (`coordinator_handle`).

The top of `actors/`: imports `roles/` (`hosting.actor_class` imports each role's class when
a host builds one), `llm/` and `base/`; imported only by `cli/` (and tests and benchmarks)."""
