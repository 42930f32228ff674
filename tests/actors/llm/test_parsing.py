"""Reply parsing on the shapes real models produce (first fenced block, truncation,
reasoning tags, insights, plans) and the failure reasons."""

from __future__ import annotations

import pytest

from actors.llm.parsing import (
    EMPTY_REPLY,
    NO_CODE,
    ONLY_REASONING,
    TRUNCATED,
    ReplyParseError,
    code_blocks,
    extract_code,
    extract_plan,
    parse_insight,
    strip_reasoning,
)

KERNEL = "void kernel(const float* x, float* out) {\n    out[0] = x[0];\n}"


def test_prose_around_one_block_language_tag_stripped():
    reply = f"Here is the optimized kernel:\n\n```c\n{KERNEL}\n```\n\nIt tiles the loop."
    block = extract_code(reply)
    assert block.code == KERNEL + "\n"
    assert block.lang == "c" and block.closed and block.blocks == 1


def test_two_blocks_take_the_first():
    second = KERNEL.replace("x[0]", "x[1]")
    reply = f"Version A:\n```c\n{KERNEL}\n```\nor version B:\n```c\n{second}\n```\n"
    block = extract_code(reply)
    assert "x[0]" in block.code and block.index == 0 and block.blocks == 2


def test_snippet_before_the_full_kernel_prefers_the_block_with_the_entry_point():
    reply = f"Change\n```c\n#define TILE 64\n```\nFull kernel:\n```c\n#define TILE 64\n{KERNEL}\n```"
    assert extract_code(reply).code.startswith("#define TILE 64\n")
    assert "kernel(" not in extract_code(reply).code  # no entry given: the first block
    block = extract_code(reply, entry="kernel")
    assert "void kernel" in block.code and block.index == 1


def test_a_reply_cut_off_mid_code_is_truncated_never_a_kernel():
    reply = f"Sure.\n```c\n{KERNEL}\n/* the rest was cut off by max_tok"
    [block] = code_blocks(reply)  # the block is found, and known to be open
    assert not block.closed and block.code.rstrip().endswith("max_tok")
    with pytest.raises(ReplyParseError) as e:
        extract_code(reply)
    assert e.value.reason == TRUNCATED == "truncated" and "no closing fence" in e.value.detail
    # a closed block before the cut is still a whole kernel
    assert extract_code(f"```c\n{KERNEL}\n```\nAnd a variant:\n```c\nvoid kern").code == KERNEL + "\n"


def test_prose_with_no_code_fails_with_reason():
    with pytest.raises(ReplyParseError) as e:
        extract_code("I would tile the j loop by 64 and unroll the inner loop by 4.")
    assert e.value.reason == NO_CODE == "no code block in reply"


@pytest.mark.parametrize("reply", ["", "   \n", None])
def test_empty_reply(reply):
    with pytest.raises(ReplyParseError) as e:
        extract_code(reply)
    assert e.value.reason == EMPTY_REPLY


def test_fence_inside_think_is_ignored():
    reply = (
        f"<think>Maybe:\n```c\nint draft;\n```\nno, better tile it.</think>\n"
        f"Final kernel:\n```c\n{KERNEL}\n```"
    )
    assert extract_code(reply).code == KERNEL + "\n"


def test_reply_cut_off_inside_think_has_no_answer():
    with pytest.raises(ReplyParseError) as e:
        extract_code("<think>Let me think about tiling.\n```c\nint draft;\n```\nand then")
    assert e.value.reason == ONLY_REASONING


def test_stray_closing_think_tag_drops_the_reasoning_before_it():
    reply = f"reasoning with ```c\nint draft;\n``` inside</think>\n```c\n{KERNEL}\n```"
    assert extract_code(reply).code == KERNEL + "\n"


def test_cpp_tagged_block_and_tilde_fences_and_longer_fences():
    assert extract_code(f"```cpp\n{KERNEL}\n```").lang == "cpp"
    assert extract_code(f"~~~c\n{KERNEL}\n~~~").code == KERNEL + "\n"
    nested = f"````c\n/* use ``` fences */\n{KERNEL}\n````"
    assert extract_code(nested).code.startswith("/* use ``` fences */")


def test_plan_strips_reasoning():
    assert extract_plan("<think>hmm</think>\n  Tile the j loop by 64.  ") == "Tile the j loop by 64."
    with pytest.raises(ReplyParseError):
        extract_plan("<thinking>only thoughts")


def test_insight_title_and_body():
    reply = (
        "<think>compare</think>**Increase TILE_J (32 -> 64)**\nLarger tiles amortize loop overhead.\n"
        "Original code:\n```c\n#define TILE_J 32\n```\nOptimized code:\n```c\n#define TILE_J 64\n```"
    )
    ins = parse_insight(reply)
    assert ins.title == "Increase TILE_J (32 -> 64)"
    assert (
        ins.text.startswith("**Increase TILE_J")
        and "Optimized code" in ins.text
        and "<think>" not in ins.text
    )
    assert not ins.noop


def test_insight_without_bold_uses_first_line_and_noop_detected():
    assert parse_insight("## Hoist the division\nMultiply by the reciprocal.").title == "Hoist the division"
    noop = parse_insight("The kernels are identical.\n**No optimization found**")
    assert noop.noop and noop.title == "No optimization found"
    assert parse_insight("No optimization found").noop


def test_strip_reasoning_keeps_plain_text():
    assert strip_reasoning("plain answer") == "plain answer"


def test_an_nki_module_gets_the_imports_it_uses_and_the_entry_alias():
    from hardware_agents.neuron.nki_source import complete_nki_module

    body = "@nki.jit\ndef optimized_kernel(a):\n    t = nl.load(a)\n    return nisa.nc_transpose(t)\n"
    out = complete_nki_module(body, "kernel")
    assert out.startswith(
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
        "import neuronxcc.nki.isa as nisa\n@nki.jit"
    )
    assert "import numpy" not in out  # np is not used
    assert out.rstrip().endswith("kernel = optimized_kernel")
    compile(out, "kernel.py", "exec")
    # a complete module is left exactly as it is, and the entry is never aliased over
    whole = (
        "import numpy as np\nfrom neuronxcc import nki\nimport neuronxcc.nki.language as nl\n\n"
        "@nki.jit\ndef kernel(a):\n    return nl.load(a) * np.float32(2)\n\ndef optimized_kernel(a):\n    pass\n"
    )
    assert complete_nki_module(whole, "kernel") == whole


@pytest.mark.parametrize(
    ("parse", "what"), [(extract_code, "answer"), (extract_plan, "plan"), (parse_insight, "insight")]
)
def test_every_parser_refuses_an_empty_reply_and_one_of_only_reasoning_alike(parse, what):
    for empty in ("", "  \n", None):
        with pytest.raises(ReplyParseError) as e:
            parse(empty)
        assert e.value.reason == EMPTY_REPLY
    with pytest.raises(ReplyParseError) as e:
        parse("<think>Let me think about tiling, then")
    assert e.value.reason == ONLY_REASONING and f"no {what} after it" in str(e.value)
