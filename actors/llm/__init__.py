"""The LLM plumbing: every model call goes through `gateway` (litellm), `pricing` knows what
a model costs without importing litellm, `preflight` checks before a run that every role can
reach its model, `tuner` is the offline `builtin/tuner` model, `parsing` reads kernels,
plans and insights out of replies, and `local_llm` serves a small real model on loopback
(its server's pins: `local_llm_constraints.txt`, package data read by `local_llm`).

Imports no other group of `actors/`; imported by `roles/` (the LLM roles), `runtime/` (the
session records prices) and `cli/` (preflight, prices, `accelopt local-llm`)."""
