"""What crosses into a sandboxed child's environment and out of its output: the environment
from an allowlist with secrets refused, the kernel's output bounded and redacted."""

from __future__ import annotations

import os
import re

_ENV_ALLOW = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH"}
_ENV_ALLOW_PREFIXES = ("LC_",)
_SECRET_RE = re.compile(
    r"(_API_KEY$|_APIKEY$|_TOKEN$|^TOKEN$|SECRET|PASSWORD|PASSWD|CREDENTIAL|_AUTH$|PRIVATE_KEY"
    r"|^AWS_|^OPENAI|^ANTHROPIC|^HF_TOKEN|^HUGGING_FACE_HUB_TOKEN|^GITHUB_TOKEN|^GH_TOKEN"
    r"|^AZURE_|^GOOGLE_APPLICATION|^GEMINI|^COHERE|^MISTRAL|^GROQ|^TOGETHER|^DEEPSEEK|^XAI_"
    r"|^LITELLM_(?!LOCAL_MODEL_COST_MAP)|^SSH_AUTH|^GPG_)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_RE.search(name))


def scrub_env(
    environ: dict[str, str] | os._Environ[str] | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The child's environment: allowlisted basics of `environ` plus `extra`, minus secrets."""
    src = os.environ if environ is None else environ
    env = {
        k: v
        for k, v in src.items()
        if (k in _ENV_ALLOW or k.startswith(_ENV_ALLOW_PREFIXES)) and not is_secret_name(k)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    for k, v in (extra or {}).items():
        if is_secret_name(k):
            raise ValueError(f"refusing to pass {k!r} into a sandbox: it looks like a secret")
        env[k] = v
    return env


_SCRUB_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,}|[A-Za-z0-9+/]{40,}={0,2})"
)


def scrub_output(raw: bytes, *, max_lines: int = 40, max_chars: int = 4000) -> str:
    """What of a kernel's own output may go back to an LLM: the first lines, printable text
    only, long opaque tokens (keys, base64 dumps) redacted, bounded in lines and characters."""
    text = raw.decode("utf-8", "replace")
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in text)
    lines = text.splitlines()
    cut = len(lines) > max_lines
    text = "\n".join(_SCRUB_SECRET.sub("[redacted]", ln[:400]) for ln in lines[:max_lines])
    if len(text) > max_chars:
        text, cut = text[:max_chars], True
    return text + ("\n[... output truncated ...]" if cut else "")
