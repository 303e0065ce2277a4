"""The one bound on a test's waits: for a process, thread, server or file it started to finish or appear.

A bound ends a hang with a clear failure instead of holding the suite; it is never an expectation of speed.
What an idle machine does in 40 s took over 300 s on a 2-core machine at load 20 (`marl train` of CartPole to a
return of 150, tests/test_cli_surface.py), so a wait shorter than this one fails tests that are merely slow.
`test_no_timing_assertions.py` refuses a literal `timeout=` or deadline between 10 s and this bound in tests
(a request's own short timeout, e.g. 1 s for a local socket that is already listening, stays below 10 s).
"""

HANG_S = 3600
