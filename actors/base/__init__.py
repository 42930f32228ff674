"""What every work-consuming actor is built on: the fetch -> handle -> publish -> ack loop
on a durable consumer (`worker`), the run's `RunStarted` fetched once per run
(`run_context`) and the recorded run whose replies a repeat may serve (`recordings`).

Imports no other group of `actors/`; imported by `roles/` (every actor is a `Worker`) and
`runtime/` (worker options)."""
