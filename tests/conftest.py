"""Suite-wide settings: Hypothesis runs the same examples on every machine.

CI runs on a clean clone, where ``.hypothesis/`` does not exist and the first ``st.text()`` of
the run builds Hypothesis's Unicode tables (~2 s), which trips the ``too_slow`` health check of
whichever test happens to draw text first. The profile below makes every property test
deterministic (``derandomize``: the examples derive from the test itself, not from a random seed
or a saved database) and tolerates that one-off start-up cost; every other health check stays on.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "sowdb",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("sowdb")
