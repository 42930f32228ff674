"""The judging pipeline every hardware agent runs, with its language's steps plugged in.

`stages`: the stages of every profile in their one order (`STAGES`: static checks, build,
stage inputs, correctness, timing rounds, clock bound, roofline gate, verdict), `run_stages`
(which `HardwareAgent.profile` calls with the family's `Stages` hooks) and `stages_of` (the
stages a profile went through, from its counters). The modules below are what the hooks use.

A profile is: plan the cases, run the kernel on them in a sandboxed child, judge how the
child ended and its outputs against the agent's own references, time it in rounds the
agent drives and clocks, bound the kernel's clock by the agent's, place the result on the
roofline and gate it. The steps every agent repeats live here, one module each; an agent
keeps what is its language's own (the static checks, compiling, launching its harness,
laying out the data, reading its outputs back, its device's specs):

- the validity layer (the field's known reward hacks: hardware_agents/README.md):
  `inputgen` (`InputCase`, `generate` from a definition's init expressions, `input_cases`,
  `adversarial_cases`, `make_inputs`, `numpy_dtype`), `numpy_ref` (`reference_outputs`: the
  numpy reference in float64), `buffers` (`alloc_outputs`, poisoned; `same_bytes` for
  mutation checks), `compare` (`tolerance_of`, `RefStats`, `compare_outputs`,
  `max_relative_error`, `sampled_agreement`) and `fp32` (`Fp32Floor`, `fp32_floor`: the bar
  widened by float32's own error where float32 cannot meet it);
- `cases`: `plan_cases` (the seeds and adversarial cases of each workload), `fresh_seed`
  (timing inputs no kernel has seen), `adversarial_overflow` (an unusable reference);
- `verdict`: `Verdict`, the profile in the making: `profile` (any status), the statuses of a child's end
  (`ended`: freeze breach, sandbox_error, timeout, runtime_error / compile_error), processes
  left behind (`left_processes`), the cases judged (`fail_case`, `wrong_cases`);
- `rounds`: `drive_rounds` over a driven child (or its halves `drive_to_rounds`, to the
  stop before round 0, and `drive_timing`) (calibration rounds, an untimed step, timing
  rounds with the language's `hand_over` and `after_round`), `RoundClock`, `timed_step`;
- `clock`: `ClockBound` and `clock_mismatch`, the kernel's clock bounded by ours (with the
  calibrated untimed work as the lower bound where the language calibrates it);
- `device_spec`: `DeviceSpec` (a device's roofline peaks, measured or cited; its cache-aware
  bandwidth curve), `roofline_terms` and `t_peak` (the time a problem takes on them);
- `roofline`: `place` (t_peak, peak_fraction, bound), `achieved`, `implausible`, and
  `speed_verdict`: passed, or incorrect when faster than the roofline allows;
- `stats`: `latency_stats`, `spread`, `range_spread`;
- `phases`: `Phases`, where a profile's wall time goes (`phase_<name>_s` counters on our
  clock), `phases_of`.

Nothing here imports an agent or `base.py`; agents and `base.py` import these modules
(tests/test_layers.py checks the layers of hardware_agents/, `DEVICE_LAYERS`, and that no
modules import each other in a circle). See hardware_agents/README.md.
"""
