"""Failing models: a run fails (`RunFailed`) when a role's last `llm.fail_after` calls all
failed with errors no retry can fix (a missing key, an unknown model): going on would only
complete the run on its baselines. Any other outcome of a call resets the role's streak. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt import catalog as ev

Envelope = Callable[..., ev.Envelope]  # (event type, *key, cause=...) -> its envelope


@dataclass
class ModelHealth:
    fail_after: int  # 0: never fail the run for its model
    streaks: dict[str, int] = field(default_factory=dict)  # role -> consecutive permanent failures

    def step(self, call: ev.LLMCallCompleted, env: Envelope, *, ended: bool) -> list[ev.RunFailed]:
        """The RunFailed that `call` makes (none once the run has `ended`)."""
        if not call.error or not call.permanent:
            self.streaks.pop(call.role, None)
            return []
        streak = self.streaks[call.role] = self.streaks.get(call.role, 0) + 1
        if self.fail_after <= 0 or streak < self.fail_after or ended:
            return []
        return [
            ev.RunFailed(
                **env(ev.RunFailed, "llm", call.role, cause=call),
                reason=f"LLM calls failing ({call.role})",
                detail=f"the last {streak} calls of the {call.role} ({call.model}) failed with errors no "
                f"retry can fix; the last: {call.error[:1500]}",
            )
        ]
