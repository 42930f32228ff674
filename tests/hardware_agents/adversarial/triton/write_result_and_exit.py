# expect: runtime_error
# problem: triton/rmsnorm_h4096
# why: forges the harness's answer: writes a result file claiming success and exits the
#      process at import; the parent believes only what it reads from its own pipe and files
#      it validates, so the child's early exit is a failure.
import os

for where in ("result.msgpack", ".sandbox/result.msgpack"):
    try:
        with open(where, "wb") as f:
            f.write(b"\x81\xa6status\xa2ok")
    except OSError:
        pass
os._exit(0)


def run(hidden_states, weight, output):
    pass
