"""What a run's LLM calls cost, and the budget that stops it: each call counts once (a copy of
it, or a call of a request no longer pending, counts nothing), and the call that reaches
`llm.budget_usd` makes the run stop spending (one `BudgetExceeded`). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt import catalog as ev

Envelope = Callable[..., ev.Envelope]  # (event type, *key, cause=...) -> its envelope


@dataclass
class Spend:
    budget_usd: float | None
    spent_usd: float = 0.0
    exceeded: bool = False
    counted: dict[str, set[str]] = field(default_factory=dict)  # pending request id -> calls counted

    def count(self, call: ev.LLMCallCompleted) -> bool:
        """Add `call`'s cost unless it was counted already; True if it was new."""
        counted = self.counted.setdefault(call.request_id, set())
        if call.event_id in counted:
            return False
        counted.add(call.event_id)
        self.spent_usd += call.cost_usd
        return True

    def forget(self, request_id: str) -> None:
        """The request is answered (or dropped): its later copies are caught by the caller."""
        self.counted.pop(request_id, None)

    def step(self, call: ev.LLMCallCompleted, env: Envelope) -> list[ev.BudgetExceeded]:
        """After `call` was counted: the run's one BudgetExceeded when it reached the budget."""
        if self.budget_usd is None or self.spent_usd < self.budget_usd or self.exceeded:
            return []
        self.exceeded = True
        return [
            ev.BudgetExceeded(
                **env(ev.BudgetExceeded, cause=call), spent_usd=self.spent_usd, budget_usd=self.budget_usd
            )
        ]
