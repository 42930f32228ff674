"""An LLM-provider plugin as another package would ship it: every `mycorp/<model>` model.
Its "backend" is the offline tuner (no network here); a real one would call its service."""

from typing import Any

from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from actors.llm.role_table import tuner_reply
from actors.llm.tuner import fill_response


class MyCorpLLM(CustomLLM):
    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        messages = kwargs.get("messages") or []
        text = tuner_reply(messages, meta.get("accelopt_role"), int(meta.get("sample_index") or 0))
        return fill_response(kwargs["model_response"], str(kwargs.get("model")), messages, text)

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.completion(*args, **kwargs)
