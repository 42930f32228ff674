# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: launched no Triton kernel
# why: a Triton solution whose Triton path never runs (a torch computation, right values;
#      reason no_triton_launch):
#      "correct" would say nothing about a Triton kernel.
import torch


def run(hidden_states, weight, output):
    x = hidden_states.float()
    output.copy_((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(output.dtype))
