"""Starting and hosting the actors: one run from start to finish (`session`), a warm pool of
agents shared by runs (`pool`), the Ray deployment of a run's actors (`deployment`), the
generic Ray host that builds any actor from its import path (`hosting`) and the run's
coordinator as the session sees it (`coordinator_handle`).

The top of `actors/`: imports `roles/` (by import path in `hosting.ROLE_FACTORIES`),
`llm/` and `base/`; imported only by `cli/` (and tests and benchmarks)."""
